"""`Video(storage=...)`: video cells, and their read-time decoding with OpenCV.

Three storage modes:
- "path": the cache owns a content-addressed copy of the file (hard-linked where possible);
- "bytes": the encoded file is stored inline in the row;
- "frames": each video is decoded once at build time into WebP frames, one Lance row per
  frame (the `lance_video_frames` layout serves windows of frames).

Rows give a `VideoRef` (path, bytes, extension, media type, size, checksum) unless a
`VideoDecodeConfig` is set on the dataset, in which case they give decoded frames.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pyarrow as pa

from stable_datasets.cache.media import MediaStore, current_media_store
from stable_datasets.cache.publish import file_sha256
from stable_datasets.env import env_number
from stable_datasets.errors import EncodingError
from stable_datasets.features.base import FeatureType, describe
from stable_datasets.features.features import Features, walk_features
from stable_datasets.features.image import READ_RGB
from stable_datasets.features.sequence import Sequence

STORAGES = ("path", "bytes", "frames")
MEDIA_TYPES = {"mp4": "video/mp4", "avi": "video/x-msvideo", "mkv": "video/x-matroska", "webm": "video/webm",
               "mov": "video/quicktime", "mpg": "video/mpeg", "gif": "image/gif"}
STORAGE_TYPE = pa.struct([("path", pa.string()), ("bytes", pa.binary()), ("extension", pa.string()),
                          ("size", pa.int64()), ("sha256", pa.string())])


def sniff_extension(head: bytes) -> str | None:
    """The container of encoded video bytes, from their first bytes."""
    if head[4:8] == b"ftyp":
        return "mov" if head[8:10] == b"qt" else "mp4"
    if head[:4] == b"RIFF" and head[8:11] == b"AVI":
        return "avi"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "webm" if b"webm" in head[:64] else "mkv"
    if head[:4] in (b"\x00\x00\x01\xba", b"\x00\x00\x01\xb3"):
        return "mpg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


@dataclass(frozen=True)
class VideoRef:
    """A stored video: a file path ("path" storage) or inline bytes ("bytes" storage)."""

    path: str | None
    bytes: bytes | None
    extension: str
    media_type: str
    size: int
    checksum: str

    def read_bytes(self) -> bytes:
        return self.bytes if self.bytes is not None else Path(self.path).read_bytes()  # type: ignore[arg-type]

    @contextlib.contextmanager
    def local_path(self) -> Iterator[str]:
        """A filesystem path for decoders; inline bytes go to a temp file removed on exit."""
        if self.path is not None:
            yield self.path
            return
        fd, name = tempfile.mkstemp(suffix=f".{self.extension}", prefix="sds-video-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(self.bytes or b"")
            yield name
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


@dataclass(frozen=True)
class VideoDecodeConfig:
    """How rows decode videos at read time (not part of any fingerprint)."""

    num_frames: int = 16
    sampling: str = "uniform"  # "uniform": evenly over the video; "random": a random strided clip
    frame_stride: int = 1
    resize: int | tuple[int, int] | None = None  # shorter side, or (height, width)
    output: str = "numpy"  # or "torch"
    layout: str = "THWC"  # or "TCHW"
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.num_frames < 1 or self.frame_stride < 1:
            raise ValueError("num_frames and frame_stride must be at least 1")
        if self.sampling not in ("uniform", "random"):
            raise ValueError(f"sampling must be 'uniform' or 'random', got {self.sampling!r}")
        if self.output not in ("numpy", "torch"):
            raise ValueError(f"output must be 'numpy' or 'torch', got {self.output!r}")
        if self.layout not in ("THWC", "TCHW"):
            raise ValueError(f"layout must be 'THWC' or 'TCHW', got {self.layout!r}")


def resize_frame(frame: np.ndarray, resize: int | tuple[int, int] | None) -> np.ndarray:
    """Resize to (height, width), or so the shorter side is `resize` (aspect ratio kept)."""
    if resize is None:
        return frame
    h, w = frame.shape[:2]
    if isinstance(resize, int):
        scale = resize / min(h, w)
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
    else:
        size = (int(resize[1]), int(resize[0]))
    if size == (w, h):
        return frame
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA if size[0] < w else cv2.INTER_LINEAR)


def sample_indices(num_available: int, config: VideoDecodeConfig, rng: np.random.Generator) -> np.ndarray:
    """Frame indices to decode; short videos repeat their last frame."""
    n, stride = config.num_frames, config.frame_stride
    if config.sampling == "uniform":
        return np.linspace(0, max(num_available - 1, 0), n).round().astype(np.int64)
    span = (n - 1) * stride + 1
    start = int(rng.integers(0, num_available - span + 1)) if num_available >= span else 0
    return np.minimum(start + stride * np.arange(n), max(num_available - 1, 0))


@contextlib.contextmanager
def open_video(path: str) -> Iterator[Any]:
    """An OpenCV capture of `path`, released on exit; a clear error if OpenCV cannot open it."""
    capture = cv2.VideoCapture(path)
    try:
        if not capture.isOpened():
            raise ValueError(f"OpenCV cannot open video {path}")
        yield capture
    finally:
        capture.release()


def read_frames(path: str, indices: np.ndarray, resize: int | tuple[int, int] | None = None) -> np.ndarray:
    """Decode the frames at `indices` (any order, repeats allowed) as RGB uint8 (T, H, W, C)."""
    with open_video(path) as capture:
        return _read_open_frames(capture, path, indices, resize)


def _read_open_frames(capture: Any, path: str, indices: np.ndarray,
                      resize: int | tuple[int, int] | None) -> np.ndarray:
    wanted = sorted(set(int(i) for i in indices))
    frames: dict[int, np.ndarray] = {}
    position = 0
    if wanted and wanted[0] > 0:
        capture.set(cv2.CAP_PROP_POS_FRAMES, wanted[0])
        position = wanted[0]
    for index in wanted:
        while position < index:
            if not capture.grab():
                break
            position += 1
        ok, frame = capture.read()
        position += 1
        if not ok:
            break
        frames[index] = resize_frame(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), resize)
    if not frames:
        raise ValueError(f"no frames could be decoded from {path}")
    last = frames[max(frames)]
    return np.stack([frames.get(int(i), last) for i in indices])


def count_frames(path: str) -> int:
    """Frames in a video: the container's count, else counted by grabbing every frame."""
    try:
        with open_video(path) as capture:
            count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
            if count > 0:
                return count
            count = 0
            while capture.grab():
                count += 1
            return count
    except ValueError:
        return 0


def _frame_views(windows: pa.Array) -> list[list[np.ndarray] | None]:
    """Each window's frames as zero-copy uint8 views of the Arrow buffer (no bytes objects)."""
    if windows.null_count or windows.flatten().null_count:
        return [None if w is None else [np.frombuffer(f, np.uint8) for f in w] for w in windows.to_pylist()]
    frames = windows.flatten()
    data = np.frombuffer(frames.buffers()[2], np.uint8) if len(frames) else np.zeros(0, np.uint8)
    bounds = np.frombuffer(frames.buffers()[1], np.int32)[frames.offset:frames.offset + len(frames) + 1].tolist()
    views = [data[a:b] for a, b in itertools.pairwise(bounds)]
    starts = np.frombuffer(windows.buffers()[1], np.int32)[windows.offset:windows.offset + len(windows) + 1]
    starts = (starts - starts[0]).tolist()
    return [views[a:b] for a, b in itertools.pairwise(starts)]


def _decode_frame(data: bytes | np.ndarray) -> np.ndarray:
    frame = cv2.imdecode(data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8), READ_RGB)
    if frame is None:
        raise ValueError(f"a stored video frame of {len(data)} bytes could not be decoded")
    return frame


def decode_window(frames: list[bytes] | list[np.ndarray]) -> np.ndarray:
    """WebP frames -> RGB uint8 (T, H, W, C), each frame decoded straight into its slot."""
    first = _decode_frame(frames[0])
    window = np.empty((len(frames), *first.shape), np.uint8)
    window[0] = first
    for t in range(1, len(frames)):
        frame = _decode_frame(frames[t])
        if frame.shape != first.shape:
            raise ValueError(f"stored frame {t} of a window is {frame.shape[:2]}, frame 0 is {first.shape[:2]}")
        window[t] = frame
    if READ_RGB == cv2.IMREAD_COLOR:  # OpenCV before 4.11 decodes BGR only
        flat = window.reshape(-1, *first.shape[1:])
        cv2.cvtColor(flat, cv2.COLOR_BGR2RGB, dst=flat)
    return window


_decoder_pool: tuple[int, Any] | None = None


def decode_threads() -> int:
    """Threads for batch frame decoding: $STABLE_DATASETS_DECODE_THREADS, else the cores (at most 4).
    Inside torch DataLoader workers, the cores are shared out among the workers (at least one each)."""
    threads = env_number("STABLE_DATASETS_DECODE_THREADS", 0, int, lambda n: n >= 1,
                         "is not a number of threads >= 1")
    if threads:
        return threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    loader = sys.modules.get("torch.utils.data")  # not imported: not in a DataLoader worker either
    worker = loader.get_worker_info() if loader is not None else None
    if worker is not None:
        cores //= worker.num_workers
    return max(1, min(4, cores))


def _decode_group(windows: list[list[np.ndarray] | None]) -> list[np.ndarray | None]:
    return [None if w is None else decode_window(w) for w in windows]


def decode_windows(windows: list[list[np.ndarray] | None]) -> list[np.ndarray | None]:
    """Decode many windows at once: whole windows split by frame count over the calling thread
    and a small pool (cv2 releases the GIL while it decodes)."""
    global _decoder_pool
    counts = np.fromiter((len(w) if w else 0 for w in windows), np.int64, len(windows))
    threads = min(decode_threads(), len(windows))
    if threads <= 1 or counts.sum() <= 8:
        return _decode_group(windows)
    if _decoder_pool is None or _decoder_pool[0] != os.getpid():  # pools do not survive fork
        from concurrent.futures import ThreadPoolExecutor

        _decoder_pool = (os.getpid(), ThreadPoolExecutor(decode_threads() - 1, thread_name_prefix="sds-decode"))
    # group boundaries at equal shares of frames, so every thread finishes at about the same time
    cuts = np.searchsorted(np.cumsum(counts), counts.sum() * np.arange(1, threads) / threads, side="left") + 1
    bounds = [0, *np.minimum(cuts, len(windows)).tolist(), len(windows)]
    groups = [windows[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    pending = [_decoder_pool[1].submit(_decode_group, g) for g in groups[1:]]
    decoded = _decode_group(groups[0])  # the calling thread takes a share instead of waiting
    for future in pending:
        decoded.extend(future.result())
    return decoded


def decode_video(ref: VideoRef, config: VideoDecodeConfig) -> Any:
    """Sample and decode frames of one video as the config says."""
    seed = None if config.seed is None else [config.seed, int(ref.checksum[:15], 16)]
    rng = np.random.default_rng(seed)
    with ref.local_path() as path, open_video(path) as capture:  # one open serves the count and the frames
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        indices = sample_indices(count if count > 0 else count_frames(path), config, rng)
        frames = _read_open_frames(capture, path, indices, config.resize)
    if config.layout == "TCHW":
        frames = np.ascontiguousarray(frames.transpose(0, 3, 1, 2))
    if config.output == "torch":
        import torch

        return torch.from_numpy(frames)
    return frames


class Video(FeatureType):
    type_name = "Video"

    def __init__(self, storage: str = "path"):
        if storage not in STORAGES:
            raise ValueError(f"Video storage must be one of {STORAGES}, got {storage!r}")
        self.storage = storage
        # set per dataset when reading (never part of the canonical dict)
        self.decode_config: VideoDecodeConfig | None = None

    def arrow_type(self) -> pa.DataType:
        return STORAGE_TYPE

    def to_dict(self) -> dict[str, Any]:
        return {"_type": "Video", "storage": self.storage}

    def bound(self, decode_config: VideoDecodeConfig | None) -> Video:
        """A copy that decodes as configured."""
        copy = Video(self.storage)
        copy.decode_config = decode_config
        return copy

    # -- write ---------------------------------------------------------------------------
    def encode(self, value: Any, field: str) -> Any:
        if value is None:
            return None
        if isinstance(value, VideoRef):
            value = value.bytes if value.bytes is not None else value.path
        if isinstance(value, dict):
            value = value.get("bytes") if value.get("bytes") is not None else value.get("path")
        if isinstance(value, (str, os.PathLike)):
            path = Path(value)
            try:
                size = path.stat().st_size
                with open(path, "rb") as fh:
                    head = fh.read(64)
            except OSError as exc:
                raise EncodingError(field, f"cannot read video file {str(path)!r}: {exc.strerror}") from None
            extension = sniff_extension(head)
            if extension is None and size and _opens_in_opencv(path):  # a container we do not sniff
                extension = path.suffix.lstrip(".").lower() or "bin"
            if extension is None:
                raise EncodingError(field, f"{str(path)!r} is not a recognised video file "
                                           f"({size} bytes starting with 0x{head[:8].hex()})")
            sha = file_sha256(path)
            if self.storage == "bytes":
                return _cell(None, path.read_bytes(), extension, size, sha)
            if self.storage == "frames":
                return _cell(str(path.resolve()), None, extension, size, sha)
            return _cell(_building_store(field).put_file(path, sha, extension), None, extension, size, sha)
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            extension = sniff_extension(data[:64])
            if extension is None:
                raise EncodingError(field, f"not a recognised video: {len(data)} bytes starting with "
                                           f"0x{data[:8].hex()}")
            sha = hashlib.sha256(data).hexdigest()
            if self.storage == "path":
                return _cell(_building_store(field).put_bytes(data, sha, extension), None, extension, len(data), sha)
            return _cell(None, data, extension, len(data), sha)
        raise EncodingError(field, f"expected a video (path, bytes or VideoRef), got {describe(value)}")

    # -- read ----------------------------------------------------------------------------
    def to_ref(self, raw: dict[str, Any]) -> VideoRef:
        path = raw.get("path")
        if path is not None and self.storage == "path" and not os.path.isabs(path):
            # the cache that stored the row resolves its media paths (see resolve_media_paths)
            raise ValueError(f"video path {path!r} is relative to a cache it was not read from")
        extension = raw["extension"]
        return VideoRef(path=path, bytes=raw.get("bytes"), extension=extension,
                        media_type=MEDIA_TYPES.get(extension, "application/octet-stream"), size=raw["size"],
                        checksum=raw["sha256"])

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None:
            return None
        ref = self.to_ref(raw)
        if decode and self.decode_config is not None:
            return decode_video(ref, self.decode_config)
        return ref


class VideoWindow(FeatureType):
    """A window of frames as a cache of `Video(storage="frames")` serves it: the frames' WebP
    bytes, decoded to RGB uint8 (T, H, W, C). Only read, never written: the stored column is
    the Video, and the layout turns its frames into windows."""

    type_name = "VideoWindow"

    def arrow_type(self) -> pa.DataType:
        return pa.list_(pa.binary())

    def to_dict(self) -> dict[str, Any]:
        return {"_type": "VideoWindow"}

    def encode(self, value: Any, field: str) -> Any:
        raise EncodingError(field, "frame windows are read from a cache, not written: declare the column as "
                                   "Video(storage='frames')")

    def decode(self, raw: Any, *, numpy: bool = False, decode: bool = True) -> Any:
        if raw is None:
            return None
        return decode_window(raw) if decode else raw

    def decode_array(self, array: pa.Array, *, numpy: bool = False, decode: bool = True) -> Any:
        if decode:  # the whole batch of windows at once, on several threads
            return decode_windows(_frame_views(array))
        return super().decode_array(array, numpy=numpy, decode=decode)


def _opens_in_opencv(path: Path) -> bool:
    capture = cv2.VideoCapture(str(path))
    try:
        return capture.isOpened() and capture.grab()
    finally:
        capture.release()


def _cell(path: str | None, data: bytes | None, extension: str, size: int, sha256: str) -> dict[str, Any]:
    """A stored video cell (STORAGE_TYPE)."""
    return {"path": path, "bytes": data, "extension": extension, "size": size, "sha256": sha256}


def _building_store(field: str) -> MediaStore:
    """The media store of the build in progress: path-stored videos are copied into the cache."""
    store = current_media_store()
    if store is None:
        raise EncodingError(field, "Video(storage='path') can only be encoded while building a cache")
    return store


def bind_videos(features: Any, decode_config: VideoDecodeConfig | None) -> Any:
    """A copy of `features` whose Video features decode as configured; the same object if none."""

    def bind(feature: Any) -> Any:
        if isinstance(feature, Video):
            return feature.bound(decode_config)
        if isinstance(feature, Features):
            return Features({k: bind(v) for k, v in feature.items()})
        if isinstance(feature, Sequence):
            return Sequence(bind(feature.feature), length=feature.length)
        return feature

    return bind(features) if any(isinstance(f, Video) for f in walk_features(features)) else features


def has_path_videos(features: Any) -> bool:
    return any(isinstance(f, Video) and f.storage == "path" for f in walk_features(features))


def resolve_media_row(value: Any, feature: Any, root: Path) -> Any:
    """One row's cells (Python values) with path-stored video paths made absolute under `root`."""

    if value is None or not has_path_videos(feature):
        return value
    if isinstance(feature, Video):
        return {**value, "path": str(root / value["path"])} if value.get("path") else value
    if isinstance(feature, Sequence):
        return [resolve_media_row(v, feature.feature, root) for v in value]
    if isinstance(feature, Features):
        return {k: resolve_media_row(v, feature[k], root) if k in feature else v for k, v in value.items()}
    return value


def resolve_media_paths(table: pa.Table, features: Any, root: Path) -> pa.Table:
    """`table` (rows of one cache) with the paths of its path-stored videos made absolute
    under `root`, the cache's media folder; Arrow compute, no per-row Python."""
    import pyarrow.compute as pc


    prefix = str(root).rstrip("/") + "/"

    def resolve(array: pa.Array, feature: Any) -> pa.Array:
        if isinstance(feature, Video) and feature.storage == "path":
            children = [array.field(i) for i in range(array.type.num_fields)]
            index = array.type.get_field_index("path")
            children[index] = pc.binary_join_element_wise(prefix, children[index], "")
            return pa.StructArray.from_arrays(children, fields=list(array.type), mask=array.is_null())
        if isinstance(feature, Sequence) and has_path_videos(feature.feature):
            values = resolve(array.values, feature.feature)
            return type(array).from_arrays(array.offsets, values, mask=array.is_null())
        if isinstance(feature, Features) and has_path_videos(feature):
            children = [resolve(array.field(name), feature[name]) for name in feature]
            return pa.StructArray.from_arrays(children, fields=list(array.type), mask=array.is_null())
        return array

    columns = []
    for name in table.column_names:
        feature = features.get(name) if hasattr(features, "get") else None
        column = table.column(name)
        if feature is not None and has_path_videos(feature):
            column = pa.chunked_array([resolve(chunk, feature) for chunk in column.chunks], type=column.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=table.schema)
