"""Archive detection, safe extraction and member iteration (tar, tar.gz/bz2/xz, zip, gz)."""

from __future__ import annotations

import gzip
import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from stable_datasets.errors import StableDatasetsError


class UnsafeArchiveError(StableDatasetsError):
    """An archive member would land outside the extraction folder."""


def archive_kind(path: Path) -> str | None:
    """'tar', 'zip', 'gz' (a single gzipped file) or None, by content rather than name."""
    if zipfile.is_zipfile(path):
        return "zip"
    try:
        if tarfile.is_tarfile(path):
            return "tar"
    except (OSError, tarfile.TarError):
        pass
    with open(path, "rb") as fh:
        if fh.read(2) == b"\x1f\x8b":
            return "gz"
    return None


def _checked_member_path(name: str, archive: Path) -> PurePosixPath:
    member = PurePosixPath(name)
    if member.is_absolute() or ".." in member.parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} would be written outside the target folder")
    return member


def extract_archive(path: Path, target: Path) -> Path:
    """Extract into `target` (created); a gz file becomes one file inside it. Returns what to use."""
    kind = archive_kind(path)
    target.mkdir(parents=True, exist_ok=True)
    if kind == "zip":
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                _checked_member_path(info.filename, path)
            zf.extractall(target)
        return target
    if kind == "tar":
        with tarfile.open(path) as tf:
            members = []
            for member in tf.getmembers():
                _checked_member_path(member.name, path)
                if member.issym() or member.islnk():
                    _checked_member_path(str(PurePosixPath(member.name).parent / member.linkname), path)
                if member.isfile() or member.isdir() or member.issym() or member.islnk():
                    members.append(member)
            tf.extractall(target, members=members, filter="data") if hasattr(tarfile, "data_filter") \
                else tf.extractall(target, members=members)
        return target
    if kind == "gz":
        name = path.name[:-3] if path.name.endswith(".gz") else path.name + ".out"
        out = target / name
        with gzip.open(path, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        return out
    raise StableDatasetsError(f"{path}: not a tar, zip or gzip archive")


def iter_archive(path: Path) -> Iterator[tuple[str, IO[bytes]]]:
    """Yield (member name, file object) for the regular files of a tar or zip, without extracting."""
    kind = archive_kind(path)
    if kind == "tar":
        with tarfile.open(path) as tf:
            for member in tf:
                if member.isfile():
                    fh = tf.extractfile(member)
                    if fh is not None:
                        yield member.name, fh
    elif kind == "zip":
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    with zf.open(info) as fh:
                        yield info.filename, fh
    else:
        raise StableDatasetsError(f"{path}: not a tar or zip archive")
