"""Compressed data files (`train.jsonl.gz`, `.bz2`, `.xz`, `.zst`, `.lz4`), as Hugging Face reads them.

The tabular and text loaders cut files into byte ranges and map them, which a compressed stream
does not allow; so a compressed file is decompressed once into the downloads folder (under a
name made of its real path, size, mtime, ctime and inode, so an edited file is decompressed again,
also one rewritten with its size and mtime restored: ctime moves on every write and cannot be set
back) and read from there. The fingerprint is still the compressed file's identity. Beside each copy, `source.json`
names the file and version it came from, so `stable-datasets prune` removes the copies of versions
that are gone (`stale_copies`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import lzma
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from stable_datasets.env import max_decompressed_bytes, max_decompression_ratio
from stable_datasets.loaders.columns import LoaderError

#: endings of compressed data files
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4")
#: file name ending -> pyarrow codec (None: Python's lzma)
COMPRESSIONS = dict(zip(COMPRESSION_SUFFIXES, ("gzip", "bz2", None, "zstd", "lz4")))
_NAMES = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd", ".lz4": "lz4"}
#: beside each copy: the compressed file's real path and version it was made from (for prune)
SOURCE_FILE = "source.json"
CHUNK = 1 << 20
#: the expansion ratio is checked only past this many decompressed bytes (small files may expand a lot)
RATIO_FLOOR = 64 << 20


def compression_suffix(path: str) -> str | None:
    """The compression ending of `path` (".gz", ...), or None."""
    suffix = os.path.splitext(path)[1].lower()
    return suffix if suffix in COMPRESSIONS else None


def decompressed(path: str, downloads: Path) -> str:
    """A decompressed copy of the local file `path` (made once per version of the file)."""
    suffix = compression_suffix(path)
    if suffix is None:
        return path
    stat = os.stat(path)
    source = _version(os.path.realpath(path), stat)
    key = hashlib.sha256(":".join(map(str, source.values())).encode())
    folder = downloads / "decompressed" / key.hexdigest()[:24]
    target = folder / os.path.basename(path)[: -len(suffix)]
    if target.is_file():
        return str(target)
    made_folder = not folder.exists()
    try:
        with local_copy_writes(path, folder):
            folder.mkdir(parents=True, exist_ok=True)
            # first: prune spares a copy being made
            (folder / SOURCE_FILE).write_text(json.dumps(source), encoding="utf-8")
            handle, partial = tempfile.mkstemp(dir=folder, prefix=".partial-")
    except BaseException:
        if made_folder:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        with os.fdopen(handle, "wb") as out:
            _expand(path, suffix, out, folder)
        os.replace(partial, target)  # whole or absent: a concurrent load sees one or the other
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        if made_folder:  # nothing left behind: the folder was ours
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return str(target)


def _expand(path: str, suffix: str, out: BinaryIO, folder: Path) -> None:
    """Decompress `path` into `out` a chunk at a time (memory stays at one chunk), within the bounds of
    stable_datasets.env: an absolute size, and a ratio to the compressed size once past RATIO_FLOOR bytes."""
    limit, ratio = max_decompressed_bytes(), max_decompression_ratio()
    compressed = max(1, os.path.getsize(path))
    codec = COMPRESSIONS[suffix]
    written = 0
    try:
        # closed by the `with` below
        source = lzma.open(path, "rb") if codec is None else pa.CompressedInputStream(pa.OSFile(path, "rb"), codec)  # noqa: SIM115
        with source:
            while True:
                try:
                    chunk = source.read(CHUNK)
                except MemoryError:
                    raise LoaderError(f"{path}: out of memory decompressing it ({_NAMES[suffix]} data)") from None
                if not chunk:
                    break
                written += len(chunk)
                if written > limit:
                    raise LoaderError(f"{path}: decompresses to more than {limit} bytes (the limit "
                                      "STABLE_DATASETS_MAX_DECOMPRESSED_BYTES); raise it if the file is meant to be "
                                      "that big")
                if written > RATIO_FLOOR and written > ratio * compressed:
                    raise LoaderError(f"{path}: {compressed} bytes of {_NAMES[suffix]} data expand more than {ratio} "
                                      "times (a decompression bomb?; the limit STABLE_DATASETS_MAX_DECOMPRESSION_"
                                      "RATIO); raise it if the file is meant to expand that much")
                with local_copy_writes(path, folder):
                    out.write(chunk)
            with local_copy_writes(path, folder):
                out.flush()
    except (OSError, EOFError, lzma.LZMAError, pa.ArrowException) as exc:
        if isinstance(exc, LocalCopyError):
            raise
        raise LoaderError(f"{path}: damaged {_NAMES[suffix]} data ({exc})") from None


class LocalCopyError(LoaderError, OSError):
    """The decompressed copy could not be written (a full disk, a file size limit): the input is not at fault."""


@contextlib.contextmanager
def local_copy_writes(path: str, folder: Path) -> Iterator[None]:
    """An OSError writing the copy becomes one line naming the input, the folder, and what to do."""
    try:
        yield
    except OSError as exc:
        raise LocalCopyError(f"{path}: cannot write its decompressed copy in {folder} ({exc.strerror or exc}); free "
                             "space there or raise the file size limit (ulimit -f), or point STABLE_DATASETS_CACHE_DIR "
                             "at a disk with room") from None


def _version(real_path: str, stat: os.stat_result) -> dict[str, object]:
    return {"path": real_path, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns,
            "ino": stat.st_ino}


def stale_copies(downloads: Path) -> list[Path]:
    """Folders of decompressed copies whose compressed file was edited, replaced or removed since.

    A copy made before `source.json` was recorded names no source: it is stale (it is made again
    when its file is next read)."""
    stale = []
    for folder in sorted((downloads / "decompressed").glob("*")):
        if not folder.is_dir():
            continue
        try:
            source = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
            current = _version(source["path"], os.stat(source["path"]))
        except (OSError, ValueError, KeyError, TypeError):
            stale.append(folder)
            continue
        if current != source:
            stale.append(folder)
    return stale
