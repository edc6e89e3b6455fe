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

import hashlib
import json
import lzma
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa

from stable_datasets.loaders.columns import LoaderError
from stable_datasets.loaders.folders import COMPRESSION_SUFFIXES

#: file name ending -> pyarrow codec (None: Python's lzma)
COMPRESSIONS = dict(zip(COMPRESSION_SUFFIXES, ("gzip", "bz2", None, "zstd", "lz4")))
_NAMES = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz", ".zst": "zstd", ".lz4": "lz4"}
#: beside each copy: the compressed file's real path and version it was made from (for prune)
SOURCE_FILE = "source.json"


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
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SOURCE_FILE).write_text(json.dumps(source), encoding="utf-8")  # first: prune spares a copy being made
    handle, partial = tempfile.mkstemp(dir=folder, prefix=".partial-")
    try:
        with os.fdopen(handle, "wb") as out:
            codec = COMPRESSIONS[suffix]
            try:
                if codec is None:
                    with lzma.open(path, "rb") as source:
                        shutil.copyfileobj(source, out, 1 << 20)
                else:
                    with pa.CompressedInputStream(pa.OSFile(path, "rb"), codec) as source:
                        while chunk := source.read(1 << 20):
                            out.write(chunk)
            except (OSError, EOFError, lzma.LZMAError, pa.ArrowException) as exc:
                raise LoaderError(f"{path}: damaged {_NAMES[suffix]} data ({exc})") from None
        os.replace(partial, target)  # whole or absent: a concurrent load sees one or the other
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise
    return str(target)


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
