"""Fill `binary_content` of lazy image rows from their `source_ref`.

A ref with a byte range is a ranged read of the file: plain `open` for local paths, fsspec for
URLs (`s3://`, `http://`, ...), so one batch may mix both. A ref with only a tar member is
extracted from the tar; a ref with only a path reads the whole file.
"""

from __future__ import annotations

import tarfile
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from loguru import logger

from stable_datasets.interleaved.schema import parse_source_ref

POLICIES = ("error", "warn", "drop_row", "drop_sample")


class MaterializeError(RuntimeError):
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


def read_ref(ref: dict[str, Any]) -> bytes:
    path = ref["path"]
    if ref.get("byte_offset") is not None and ref.get("byte_size") is not None:
        with _open(path) as fh:
            fh.seek(int(ref["byte_offset"]))
            data = fh.read(int(ref["byte_size"]))
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
    """Read the bytes of image rows that have a source_ref but no binary_content."""
    if on_error not in POLICIES:
        raise ValueError(f"on_materialize_error must be one of {POLICIES}, got {on_error!r}")
    if not table.num_rows:
        return table
    binary = table.column("binary_content").to_pylist()
    refs = table.column("source_ref").to_pylist()
    modality = table.column("modality").to_pylist()
    errors = table.column("materialize_error").to_pylist()
    todo: dict[str, list[int]] = defaultdict(list)
    for i, (data, ref, mod) in enumerate(zip(binary, refs, modality)):
        if mod == "image" and data is None and ref:
            todo[parse_source_ref(ref)["path"]].append(i)
    failed: list[int] = [i for i, (data, mod, err) in enumerate(zip(binary, modality, errors))
                         if mod == "image" and data is None and not refs[i] and err]
    cache: dict[tuple, bytes] = {}
    for path, rows in todo.items():
        for i in rows:
            ref = parse_source_ref(refs[i])
            key = (path, ref.get("member"), ref.get("byte_offset"))
            try:
                if key not in cache:
                    cache[key] = read_ref(ref)
                binary[i] = cache[key]
            except (OSError, MaterializeError, tarfile.TarError) as exc:
                errors[i] = f"{type(exc).__name__}: {exc}"
                failed.append(i)
    if failed and on_error == "error":
        first = failed[0]
        raise MaterializeError(f"could not materialize {len(failed)} image rows; first: sample "
                               f"{table.column('sample_id')[first].as_py()!r} position "
                               f"{table.column('position')[first].as_py()}: {errors[first]}")
    table = table.set_column(table.schema.get_field_index("binary_content"), "binary_content",
                             pa.array(binary, pa.large_binary()))
    table = table.set_column(table.schema.get_field_index("materialize_error"), "materialize_error",
                             pa.array(errors, pa.string()))
    if not failed:
        return table
    if on_error == "warn":
        logger.warning("{} image rows could not be materialized; kept with materialize_error set", len(failed))
        return table
    keep = [True] * table.num_rows
    if on_error == "drop_row":
        for i in failed:
            keep[i] = False
    else:  # drop_sample
        bad = {table.column("sample_id")[i].as_py() for i in failed}
        keep = pc.invert(pc.is_in(table.column("sample_id"), pa.array(sorted(bad)))).to_pylist()
    return table.filter(pa.array(keep))
