"""`lance_video_frames`: every video decoded once at build time into WebP frames in Lance.

Write: the builder's batches carry each example's source video (a path or bytes). Worker
processes decode each video once, resize its frames keeping the aspect ratio, and
WebP-encode them. The frames stream into `data.lance` (one row per frame: video_index,
frame_index, frame) through the threaded Lance writer of `lance_rows`. `videos.arrow`
keeps each video's other columns and its record (frames, height, width, frame rate, size
before resizing, first row, source checksum), which is also listed in `_metadata.json`.
Memory holds the frames of a few videos at most (twice the workers); corrupt videos are
skipped and counted, or fail the build.

Read: rows are frame windows (`window_length`, `frame_stride`, `hop`, `min_video_frames`).
A batch of windows reads all of its frames at once (one `take` per Lance fragment, see
RowTaker); decoding WebP to (T, H, W, C) uint8 happens in the Video feature, so
`decode=False` gives the WebP bytes.
"""

from __future__ import annotations

import collections
import itertools
import json
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np
import pyarrow as pa
from loguru import logger

from stable_datasets.cache.metadata import ShardInfo
from stable_datasets.cache.publish import file_sha256
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.features import Features, binary_array
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import Value
from stable_datasets.features.video import VideoRef, VideoWindow, resize_frame
from stable_datasets.layouts import frames_video_column
from stable_datasets.layouts.arrow_shards import map_shard
from stable_datasets.layouts.base import LayoutWriter, TableBackend, require_choice
from stable_datasets.layouts.lance import rows as lance_rows
from stable_datasets.layouts.lance.access import RowTaker, lance_read_errors, open_lance
from stable_datasets.layouts.lance.storage import LanceStorage
from stable_datasets.layouts.part_files import ON_DISK, PartFiles

if TYPE_CHECKING:
    from stable_datasets.write.parts import PartResult

NAME = "lance_video_frames"
DEFAULT_OPTIONS: dict[str, Any] = {"frame_resize": None, "webp_quality": 90, "skip_corrupt": True,
                                   "max_rows_per_file": 1 << 20, "max_rows_per_group": 1024}
READ_OPTIONS: dict[str, Any] = {"window_length": 8, "frame_stride": 1, "hop": None, "min_video_frames": None}
# a frame's video is found through the records' `first_row`, so parts written in parallel need no renumbering
FRAMES_SCHEMA = pa.schema([("frame_index", pa.int32()), ("frame", pa.binary())])
VIDEOS_FILE = "videos.arrow"
RECORD_FIELDS = [("frames", pa.int64()), ("height", pa.int64()), ("width", pa.int64()), ("fps", pa.float64()),
                 ("source_height", pa.int64()), ("source_width", pa.int64()), ("first_row", pa.int64()),
                 ("source_sha256", pa.string()), ("source", pa.string())]


def webp_params(quality: Any) -> list[int]:
    """OpenCV WebP parameters for the `webp_quality` option: 1-100 (lossy) or "lossless" (exact frames)."""
    if quality == "lossless":
        return [cv2.IMWRITE_WEBP_QUALITY, 101]  # OpenCV encodes lossless above 100
    if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
        raise ValueError(f"layout option webp_quality must be an int from 1 to 100 or 'lossless', got {quality!r}")
    return [cv2.IMWRITE_WEBP_QUALITY, quality]


def check_options(options: dict[str, Any]) -> None:
    lance_rows.check_options(options)
    webp_params(options["webp_quality"])
    require_choice(options, "skip_corrupt", (True, False))
    resize = options["frame_resize"]
    sizes = list(resize) if isinstance(resize, (list, tuple)) and len(resize) == 2 else [resize]
    if resize is not None and not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
        raise ValueError(f"layout option frame_resize must be None, a positive int (the shorter side) or "
                         f"[height, width], got {resize!r}")


#: the `extension` of a video cell whose frames are already WebP-encoded in another Lance frame dataset
#: (an upstream stable-datasets cache being migrated): its `path` is `stored_frames_ref(...)`, and the writer
#: copies those frames as they are instead of decoding a video
STORED_FRAMES = "stored-frames"


def stored_frames_ref(dataset: str, frame_column: str, first_row: int, frames: int, height: int, width: int,
                      source: str) -> str:
    """The `path` of a STORED_FRAMES cell: where the frames of one video are and what they are."""
    return json.dumps({"dataset": dataset, "frame_column": frame_column, "first_row": first_row, "frames": frames,
                       "height": height, "width": width, "source": source})


def fork_frame_encoders(workers: int) -> Any:
    """A fork pool of `workers` single-threaded OpenCV processes.

    OpenCV's own thread pool does not survive a fork: a child that inherits a pool whose threads
    are gone hangs in its first `cv2.setNumThreads` or parallel call (seen whenever the building
    process had used OpenCV in parallel before, e.g. decoding videos). So the parent's pool is
    stopped while the workers are forked (they inherit one thread and no pool), then restored.
    """
    previous = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        return multiprocessing.get_context("fork").Pool(workers)
    finally:
        cv2.setNumThreads(previous)


def encode_frames(job: tuple[str | None, bytes | None, str, str, Any, list[int]]) -> dict[str, Any] | str:
    """Worker: decode one video and WebP-encode its frames; an error message if it cannot.

    Returns the frames with the video's own metadata: its frame rate and its size before any
    `frame_resize`.
    """
    path, data, extension, sha256, resize, params = job
    ref = VideoRef(path=path, bytes=data, extension=extension, media_type="", size=0, checksum=sha256)
    frames: list[bytes] = []
    height = width = source_height = source_width = 0
    try:
        with ref.local_path() as local:
            capture = cv2.VideoCapture(local)
            if not capture.isOpened():
                return "OpenCV cannot open it"
            try:
                fps = float(capture.get(cv2.CAP_PROP_FPS) or 0.0)
                while True:
                    ok, frame = capture.read()
                    if not ok:
                        break
                    source_height, source_width = frame.shape[:2]
                    frame = resize_frame(frame, resize)
                    height, width = frame.shape[:2]
                    ok, buffer = cv2.imencode(".webp", frame, params)
                    if not ok:
                        return f"WebP encoding failed at frame {len(frames)}"
                    frames.append(buffer.tobytes())
            finally:
                capture.release()
    except OSError as exc:
        return str(exc)
    if not frames:
        return "no decodable frames"
    return {"frames": frames, "height": height, "width": width, "fps": fps, "source_height": source_height,
            "source_width": source_width}


def ordered_bounded_map(pool: Any, fn: Callable[[Any], Any], items: Iterable[Any], ahead: int) -> Iterator[Any]:
    """`pool.imap(fn, items)` with at most `ahead` items submitted and not yet consumed.

    `imap` submits every item at once, so when the consumer (here the Lance writer) is slower
    than the workers, finished results pile up: for a batch of long videos, all their frames.
    """
    pending: collections.deque[Any] = collections.deque()
    source = iter(items)
    for item in itertools.islice(source, ahead):
        pending.append(pool.apply_async(fn, (item,)))
    while pending:
        result = pending.popleft().get()
        for item in itertools.islice(source, 1):
            pending.append(pool.apply_async(fn, (item,)))
        yield result


class Writer(LayoutWriter):
    def __init__(self, directory: Path, schema: pa.Schema, options: dict[str, Any]):
        super().__init__(directory, schema, {**DEFAULT_OPTIONS, **options})
        self._webp_params = webp_params(self.options["webp_quality"])
        features = Features.from_arrow_schema(schema)
        column = frames_video_column(features)
        if column is None:
            raise StableDatasetsError("the lance_video_frames layout needs a Video(storage='frames') column")
        self._video_column = column
        self._other_columns = [name for name in schema.names if name != column]
        workers = min(4, os.cpu_count() or 1)  # not an option: it cannot change the frames
        # Fork, not spawn: spawn and forkserver re-import the user's __main__, so a script without a
        # main guard would run again in every worker. The workers only touch OpenCV and numpy, never
        # Lance, and start before our Lance writer thread does.
        self._pool = fork_frame_encoders(workers) if workers > 1 else None
        self._ahead = 2 * workers  # videos being encoded or waiting to be written
        self._frames = lance_rows.Writer(directory, FRAMES_SCHEMA, {
            "max_rows_per_file": self.options["max_rows_per_file"],
            "max_rows_per_group": self.options["max_rows_per_group"]}, blobs=False)  # windows read through Lance
        self._videos: list[dict[str, Any]] = []
        self._others: list[pa.RecordBatch] = []
        self._skipped = 0
        self._stored: dict[str, RowTaker] = {}  # Lance datasets that STORED_FRAMES cells are copied from
        self._next_row = 0
        self._seen_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        resize = self.options["frame_resize"]
        resize = tuple(resize) if isinstance(resize, list) else resize
        sources = batch.column(self._video_column).to_pylist()  # one small dict per video, not per frame
        if sources and all(s["extension"] == STORED_FRAMES for s in sources):
            results: Iterable[Any] = map(self._stored_frames, sources)
        else:
            jobs = [(s["path"], s["bytes"], s["extension"], s["sha256"], resize, self._webp_params) for s in sources]
            results = ordered_bounded_map(self._pool, encode_frames, jobs, self._ahead) if self._pool else \
                map(encode_frames, jobs)
        kept = []
        for position, (source, result) in enumerate(zip(sources, results)):
            row = self._seen_rows + position
            if isinstance(result, str):
                where = source["path"] or f"inline video of row {row} (sha256 {source['sha256'][:12]})"
                if not self.options["skip_corrupt"]:
                    raise StableDatasetsError(f"video {where} could not be decoded: {result}")
                self._skipped += 1
                logger.warning("skipping video {}: {} ({} skipped so far)", where, result, self._skipped)
                continue
            frames = result.pop("frames")
            self._frames.write(pa.RecordBatch.from_arrays(
                [pa.array(np.arange(len(frames), dtype=np.int32)), binary_array(frames)], schema=FRAMES_SCHEMA))
            self._videos.append({"frames": len(frames), "source": source["path"], **result,
                                 "first_row": self._next_row, "source_sha256": source["sha256"]})
            self._next_row += len(frames)
            kept.append(position)
        self._seen_rows += batch.num_rows
        if kept:
            self._others.append(batch.select(self._other_columns).take(pa.array(kept)))

    def _stored_frames(self, source: dict[str, Any]) -> dict[str, Any]:
        """The WebP frames of a STORED_FRAMES cell, read from their Lance dataset in this process (the
        pool's workers never touch Lance), with the record the ref carries; nothing is re-encoded."""
        ref = json.loads(source["path"])
        if ref["dataset"] not in self._stored:
            self._stored[ref["dataset"]] = RowTaker(open_lance(ref["dataset"]))
        rows = np.arange(ref["first_row"], ref["first_row"] + ref["frames"], dtype=np.int64)
        frames: list[bytes] = []
        if len(rows):  # a video of no frames reads nothing (a take of no rows is an error in Lance)
            with lance_read_errors(ref["dataset"], rows, "copying stored frames"):
                frames = self._stored[ref["dataset"]].take(rows, [ref["frame_column"]]).column(
                    ref["frame_column"]).to_pylist()
        return {"frames": frames, "height": ref["height"], "width": ref["width"], "fps": 0.0,
                "source_height": ref["height"], "source_width": ref["width"], "source": ref["source"]}

    def close(self) -> list[ShardInfo]:
        self._close_pool()
        shards = self._frames.close()
        other_schema = pa.schema([self.schema.field(n) for n in self._other_columns])
        others = pa.Table.from_batches(self._others, schema=other_schema)
        # each video's record rides in one struct column after the others, so no name can clash
        table = others.append_column("_frame_record", pa.array(self._videos, pa.struct(RECORD_FIELDS)))
        path = self.directory / VIDEOS_FILE
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return [*shards, ShardInfo(path=VIDEOS_FILE, num_rows=table.num_rows, num_bytes=path.stat().st_size,
                                   sha256=file_sha256(path))]  # merge_parts makes the cache's own

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool.join()
            self._pool = None

    def abort(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        self._frames.abort()

    def extra_metadata(self) -> dict[str, Any]:
        return {"video_column": self._video_column, "frame_format": "webp", "num_videos": len(self._videos),
                "skipped_videos": self._skipped, "videos": self._videos, **self._frames.extra_metadata()}


def merge_parts(staging: Path, parts: list[PartResult],
                files: PartFiles = ON_DISK) -> tuple[list[ShardInfo], dict[str, Any]]:
    """Frames of every part committed once (their data files moved, or copied on the store: `files`); video
    records joined in order, their first rows shifted past the frames of the parts before. Each part's small
    videos table is read (downloaded, on the store); the frames are not."""
    tables, videos = [], []
    offset = 0
    for part in parts:
        with pa.memory_map(str(files.local(staging, part, VIDEOS_FILE))) as source:
            table = pa.ipc.open_file(source).read_all()
        records = [{**v, "first_row": v["first_row"] + offset} for v in part.extra["videos"]]
        column = table.schema.get_field_index("_frame_record")
        tables.append(table.set_column(column, "_frame_record", pa.array(records, pa.struct(RECORD_FIELDS))))
        videos.extend(records)
        offset += sum(v["frames"] for v in part.extra["videos"])
    shards = lance_rows.commit_parts(staging, parts, FRAMES_SCHEMA, files)
    table = pa.concat_tables(tables).combine_chunks()
    path = staging / VIDEOS_FILE
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    shards.append(ShardInfo(path=VIDEOS_FILE, num_rows=table.num_rows, num_bytes=path.stat().st_size,
                            sha256=file_sha256(path)))
    first = parts[0].extra
    return shards, {"video_column": first["video_column"], "frame_format": first["frame_format"],
                    "num_videos": len(videos), "skipped_videos": sum(p.extra["skipped_videos"] for p in parts),
                    "videos": videos}


def seal_part(folder: Path, part: PartResult) -> PartResult:
    """A merge on the store needs nothing more than the part's record and its videos table (the frames are
    stored without blob columns, so there are no blob digests to carry)."""
    return part


class Backend(LanceStorage, TableBackend):
    """Serves windows of frames; the window options are read-time options (not fingerprinted)."""

    READ_OPTIONS = READ_OPTIONS
    read_options_name = "video window"

    def __init__(self, directory: Any, metadata: Any, **options: Any):
        super().__init__(directory, metadata, **options)
        self._window_index()

    @classmethod
    def metadata_problem(cls, metadata: Any) -> str | None:
        """The video records must agree with each other, with the Lance data files and with `num_rows`."""
        extra = metadata.extra
        videos = extra.get("videos")
        if not isinstance(extra.get("video_column"), str) or not isinstance(videos, list):
            return "extra must hold video_column (a string) and videos (a list)"
        first_row = 0
        for i, video in enumerate(videos):
            counts = [video.get(k) if isinstance(video, dict) else None for k in ("frames", "first_row")]
            if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
                return f"extra.videos[{i}] must be an object with non-negative integer frames and first_row"
            if counts[1] != first_row:
                return f"extra.videos[{i}].first_row is {counts[1]}, expected {first_row}"
            first_row += counts[0]
        frame_rows = sum(s.num_rows for s in metadata.shards if s.path.startswith(f"{lance_rows.DATASET_DIR}/"))
        if frame_rows != first_row:
            return f"the videos record {first_row} frames but the Lance data files record {frame_rows}"
        records = [s.num_rows for s in metadata.shards if s.path == VIDEOS_FILE]
        if records != [len(videos)]:
            return f"{VIDEOS_FILE} must be listed once with {len(videos)} rows (one per video), got {records}"
        skipped = extra.get("skipped_videos", 0)
        if isinstance(skipped, bool) or not isinstance(skipped, int) or metadata.num_rows != len(videos) + skipped:
            return (f"num_rows is {metadata.num_rows} but {len(videos)} videos are stored and {skipped!r} were "
                    "skipped")
        return None

    def _window_index(self) -> None:
        length, stride = int(self.options["window_length"]), int(self.options["frame_stride"])
        if length < 1 or stride < 1:
            raise ValueError("window_length and frame_stride must be at least 1")
        hop = int(self.options["hop"] or length)
        span = (length - 1) * stride + 1
        minimum = max(int(self.options["min_video_frames"] or span), span)
        videos = self.metadata.extra.get("videos", [])
        frames = np.asarray([v["frames"] for v in videos], dtype=np.int64)
        # windows per video, then (video, start) for every window, without a Python loop over windows
        counts = np.where(frames >= minimum, (frames - span) // hop + 1, 0)
        video = np.repeat(np.arange(len(videos), dtype=np.int64), counts)
        first_window = np.repeat(np.cumsum(counts) - counts, counts)
        self._win = np.stack([video, (np.arange(len(video), dtype=np.int64) - first_window) * hop], axis=1)
        self._first_row = np.asarray([v["first_row"] for v in videos], dtype=np.int64)
        self._offsets = stride * np.arange(length, dtype=np.int64)

    @property
    def num_rows(self) -> int:
        return len(self._win)

    def stored_column_order(self) -> list[str] | None:
        return None  # frames and video records are stored, not the features' columns

    def dataset_features(self, stored: Features) -> Features:
        column = self.metadata.extra["video_column"]
        others = {k: v for k, v in stored.items() if k != column}
        return Features({column: VideoWindow(), "video_index": Value("int64"), "start_frame": Value("int64"),
                         "frame_indices": Sequence(Value("int64")), **others})

    @property
    def frames_dir(self) -> str:
        """The Lance frame dataset inside the cache; an upstream stable-datasets cache keeps it at the root."""
        return self.metadata.extra.get("dataset_dir", lance_rows.DATASET_DIR)

    def _open(self) -> None:
        frames_dir = self.directory / self.frames_dir
        with lance_read_errors(frames_dir, what="opening it"):
            self._frames = self.lance_dataset(self.frames_dir)
            self._frame_rows = RowTaker(self._frames)
            stored_frames = self._frames.count_rows()
        self.check_rows(frames_dir, stored_frames, sum(v["frames"] for v in self.metadata.extra["videos"]), "frames")
        stored = Features.from_dict(self.metadata.features)
        column = self.metadata.extra["video_column"]
        self._frame_column = self.metadata.extra.get("frame_column", "frame")
        if "others" in self.metadata.extra:  # upstream: each video's scalar columns are in its record
            other_schema = pa.schema([pa.field(n, f.arrow_type()) for n, f in stored.items() if n != column])
            self._others = pa.Table.from_pylist(self.metadata.extra["others"], schema=other_schema)
        else:
            _, schema, batches = map_shard(self.directory / VIDEOS_FILE)  # validated: a flipped offset raises
            videos = pa.Table.from_batches(batches, schema=schema)
            self.check_rows(self.directory / VIDEOS_FILE, videos.num_rows, len(self.metadata.extra["videos"]),
                            "videos")
            self._others = videos.select(list(range(len(stored) - 1)))  # the record column comes last
        features = self.dataset_features(stored)
        self._schema = pa.schema([pa.field(column, pa.list_(pa.binary()))] + [
            pa.field(n, features[n].arrow_type()) for n in features if n != column])

    def take(self, indices: np.ndarray) -> pa.Table:
        self.ensure_open()
        indices = np.asarray(indices, dtype=np.int64)
        video, start = self._win[indices, 0], self._win[indices, 1]
        frame_indices = start[:, None] + self._offsets[None, :]
        rows = (self._first_row[video][:, None] + frame_indices).ravel()
        if len(rows):
            with lance_read_errors(self.directory / self.frames_dir, indices, "reading the frames of windows"):
                frames = self._frame_rows.take(rows, [self._frame_column]).column(self._frame_column)
                frames = frames.combine_chunks().cast(pa.binary())  # upstream stores large_binary
        else:
            frames = pa.array([], pa.binary())
        window_offsets = pa.array(np.arange(0, len(rows) + 1, len(self._offsets), dtype=np.int32))
        columns = {self.metadata.extra["video_column"]: pa.ListArray.from_arrays(window_offsets, frames),
                   "video_index": pa.array(video), "start_frame": pa.array(start),
                   "frame_indices": pa.ListArray.from_arrays(window_offsets, pa.array(frame_indices.ravel()))}
        others = self._others.take(pa.array(video)).combine_chunks()
        for name in others.column_names:
            columns[name] = others.column(name).combine_chunks() if others.num_rows else pa.array(
                [], type=others.schema.field(name).type)
        return pa.Table.from_pydict(columns, schema=self._schema)

    def block_bounds(self) -> np.ndarray:
        """The windows of one video are a block (their frames are stored together)."""
        video = self._win[:, 0]
        cuts = np.flatnonzero(video[1:] != video[:-1]) + 1
        return np.concatenate([[0], cuts, [len(video)]] if len(video) else [[0]]).astype(np.int64)

    def stored_row_counts(self) -> tuple[int, int]:
        """Rows are windows; what is stored and recorded is frames (checked again on open)."""
        self.ensure_open()
        with lance_read_errors(self.directory / self.frames_dir, what="counting frames"):
            return self._frames.count_rows(), sum(v["frames"] for v in self.metadata.extra["videos"])

    def iter_batches(self, start: int, stop: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
        for lo in range(start, stop, batch_rows):
            table = self.take(np.arange(lo, min(lo + batch_rows, stop)))
            yield from table.to_batches()

