"""Members of tar and zip archives, read in place (never extracted to a second copy on disk), in any order: a
gzipped tar is read through `SeekableGzip`, so going back to an earlier member does not decompress from the start."""

from __future__ import annotations

import contextlib
import os
import tarfile
import zipfile
from collections.abc import Iterator
from typing import IO

from stable_datasets.catalog.formats.gzip_index import is_gzip, open_seekable_gzip
from stable_datasets.errors import StableDatasetsError


def members_in_order(path: str | os.PathLike, names: list[str]) -> Iterator[tuple[str, IO[bytes]]]:
    """(name, file object) for each of `names` in that order, a name matching a member's full path or its last
    part. Rows then follow the official order whatever order the archive stores its members in. A missing member
    is an error naming the archive and the members it lacks."""
    path = os.fspath(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            by_name = _index(path, [info.filename for info in archive.infolist() if not info.is_dir()], names)
            for name in names:
                with archive.open(by_name[name]) as fh:
                    yield name, fh
        return
    # a .tar.gz through SeekableGzip: members read out of their stored order cost no decompression from the start
    compressed = open_seekable_gzip(path) if is_gzip(path) else None
    try:
        archive = tarfile.open(path, fileobj=compressed, mode="r:" if compressed else "r:*")  # noqa: SIM115
    except tarfile.TarError as exc:
        if compressed is not None:
            compressed.close()
        raise StableDatasetsError(f"{path}: not a tar or zip archive ({exc})") from None
    with archive, compressed or contextlib.nullcontext():
        files = {m.name: m for m in archive.getmembers() if m.isfile()}
        by_name = _index(path, list(files), names)
        for name in names:
            fh = archive.extractfile(files[by_name[name]])
            assert fh is not None  # a regular file always has a reader
            yield name, fh


def _index(path: str, members: list[str], names: list[str]) -> dict[str, str]:
    by_name: dict[str, str] = {}
    wanted = set(names)  # a set: lists of 100,000s of names (CelebA's) are looked up once a member
    for member in members:
        for key in (member, member.rsplit("/", 1)[-1]):
            if key in wanted and key not in by_name:
                by_name[key] = member
    missing = [n for n in names if n not in by_name]
    if missing:
        raise StableDatasetsError(f"{path} lacks the member(s) {missing}")
    return by_name
