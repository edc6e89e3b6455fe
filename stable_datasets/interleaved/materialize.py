"""Fill `binary_content` of lazy image rows from their `source_ref`.

A ref with a byte range is a ranged read of the file: plain `open` for local paths, fsspec for
URLs (`s3://`, `http://`, ...), so one batch may mix both. A ref with only a tar member is
extracted from the tar; a ref with only a path reads the whole file.

A ref with a `frame_index` names one frame of a multi-frame TIFF (a MINT-1T PDF document is
one TIFF with a frame per page image): the row gets that frame alone, as a single-frame TIFF.
If the frame cannot be cut out, the row keeps the whole file's bytes and `materialize_error`
says which frame failed, so nothing read is thrown away.
"""

from __future__ import annotations

import contextlib
import tarfile
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from loguru import logger

from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.image import is_decodable
from stable_datasets.interleaved.schema import parse_source_ref
from stable_datasets.interleaved.tar_format import TarFormatError, compression_of, map_stream

POLICIES = ("error", "warn", "drop_row", "drop_sample")


class MaterializeError(StableDatasetsError, RuntimeError):
    pass


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _open(path: str):
    if _is_local(path):
        return open(path.removeprefix("file://"), "rb")
    try:
        import fsspec
    except ImportError:
        raise MaterializeError(f"{path}: reading remote files needs fsspec (pip install fsspec)") from None
    return fsspec.open(path, "rb").open()


_TIFF_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")


def tiff_frame(data: bytes, index: int, what: str) -> bytes:
    """Frame `index` of a TIFF as a single-frame TIFF, pixels unchanged (depth and channels kept).

    Only that frame is decoded, so a many-page document costs one page per row, not all of them.
    An image that is not a TIFF (a PNG named .tif) is its own frame 0. MaterializeError names
    `what` if there is no such frame, or the bytes are no image at all."""
    if data[:4] not in _TIFF_MAGIC:
        if not is_decodable(data):
            raise MaterializeError(f"cannot extract frame {index} from {what}: not an image")
        if index == 0:
            return data
        raise MaterializeError(f"cannot extract frame {index} from {what}: not a TIFF, so it has one frame")
    ok, frames = (False, ()) if index < 0 else cv2.imdecodemulti(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED,
                                                                  None, (index, index + 1))
    if not ok or not frames:
        raise MaterializeError(f"cannot extract frame {index} from {what}: the TIFF has no such frame "
                               "(or it cannot be decoded)")
    ok, encoded = cv2.imencode(".tiff", frames[0])
    if not ok:
        raise MaterializeError(f"cannot extract frame {index} from {what}: OpenCV could not encode it")
    return encoded.tobytes()


@contextlib.contextmanager
def _compressed_tar(path: str) -> Iterator[memoryview | None]:
    """The decompressed bytes of a compressed tar (byte ranges in its refs point into those), else None."""
    try:
        with _open(path) as fh:
            compressed = compression_of(fh.read(6)) is not None
            if compressed:
                fh.seek(0)
                mapped, view = map_stream(fh, path)
    except (OSError, TarFormatError):
        compressed = False  # read_ref reports the file's own error for each row
    if not compressed:
        yield None
        return
    try:
        yield view
    finally:
        view.release()
        if mapped is not None:
            mapped.close()


def read_ref(ref: dict[str, Any], unpacked: memoryview | None = None) -> bytes:
    """The bytes a ref names; `unpacked` is its tar's decompressed content when the tar is compressed."""
    path = ref["path"]
    if ref.get("byte_offset") is not None and ref.get("byte_size") is not None:
        start, size = int(ref["byte_offset"]), int(ref["byte_size"])
        if unpacked is not None:
            data = bytes(unpacked[start:start + size])
        else:
            with _open(path) as fh:
                fh.seek(start)
                data = fh.read(size)
        if len(data) != int(ref["byte_size"]):
            raise MaterializeError(f"{path}: wanted {ref['byte_size']} bytes at {ref['byte_offset']}, got {len(data)}")
        return data
    if ref.get("member"):
        with _open(path) as fh, tarfile.open(fileobj=fh) as tar:
            member = tar.extractfile(ref["member"])
            if member is None:
                raise MaterializeError(f"{path}: no member {ref['member']!r}")
            return member.read()
    with _open(path) as fh:
        return fh.read()


def materialize(table: pa.Table, on_error: str = "error") -> pa.Table:
    """Read the bytes of image rows that have a source_ref but no binary_content, then apply `on_error`."""
    if on_error not in POLICIES:
        raise ValueError(f"on_materialize_error must be one of {POLICIES}, got {on_error!r}")
    if not table.num_rows:
        return table
    binary = table.column("binary_content").to_pylist()
    refs = table.column("source_ref").to_pylist()
    modality = table.column("modality").to_pylist()
    errors = table.column("materialize_error").to_pylist()
    todo: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for i, (data, ref, mod) in enumerate(zip(binary, refs, modality)):
        if mod == "image" and data is None and ref:
            parsed = parse_source_ref(ref)
            todo[parsed["path"]].append((i, parsed))
    for path, rows in todo.items():
        cache: dict[tuple, bytes] = {}
        with _compressed_tar(path) as unpacked:
            for i, ref in rows:
                key = (path, ref.get("member"), ref.get("byte_offset"))
                try:
                    if key not in cache:
                        cache[key] = read_ref(ref, unpacked)
                    binary[i], errors[i] = cache[key], None
                    if ref.get("frame_index") is not None:
                        binary[i] = tiff_frame(cache[key], int(ref["frame_index"]),
                                               f"{path}:{ref.get('member') or ''}".rstrip(":"))
                except (OSError, MaterializeError, tarfile.TarError) as exc:
                    errors[i] = f"{type(exc).__name__}: {exc}"
    table = table.set_column(table.schema.get_field_index("binary_content"), "binary_content",
                             pa.array(binary, pa.large_binary()))
    table = table.set_column(table.schema.get_field_index("materialize_error"), "materialize_error",
                             pa.array(errors, pa.string()))
    return apply_error_policy(table, on_error)


def apply_error_policy(table: pa.Table, on_error: str = "error") -> pa.Table:
    """What rows with `materialize_error` set become: an error, a warning, or dropped (row or sample)."""
    if on_error not in POLICIES:
        raise ValueError(f"on_materialize_error must be one of {POLICIES}, got {on_error!r}")
    if not table.num_rows or "materialize_error" not in table.column_names:
        return table
    failed = pc.is_valid(table.column("materialize_error"))
    count = int(pc.sum(failed).as_py() or 0)
    if not count:
        return table
    if on_error == "error":
        first = pc.index(failed, True).as_py()
        raise MaterializeError(f"could not materialize {count} image rows; first: sample "
                               f"{table.column('sample_id')[first].as_py()!r} position "
                               f"{table.column('position')[first].as_py()}: "
                               f"{table.column('materialize_error')[first].as_py()}")
    if on_error == "warn":
        logger.warning("{} image rows could not be materialized; kept with materialize_error set", count)
        return table
    if on_error == "drop_row":
        return table.filter(pc.invert(failed))
    bad = pc.unique(table.column("sample_id").filter(failed))
    return table.filter(pc.invert(pc.is_in(table.column("sample_id"), bad)))
