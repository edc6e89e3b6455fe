"""Archives of encoded image files (JPEG, PNG) whose labels live in folder names or side files: tar (gzipped or
not), zip and RAR, walked once in the archive's stored order, each member read in place (a tar is streamed, never
seeked back; nothing is extracted to disk). The image bytes are handed on as stored: no decode and re-encode."""

from __future__ import annotations

import os
import tarfile
import zipfile
from collections.abc import Callable, Iterator, Mapping

from stable_datasets.errors import StableDatasetsError, missing_extra

#: the first bytes of a RAR archive (v4 and v5 share this prefix)
RAR_SIGNATURE = b"Rar!\x1a\x07"


def stream_members(path: str | os.PathLike, keep: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """(member name, bytes) of each regular file whose name `keep` accepts, in the order the archive stores them.
    Names use "/" whatever the archive's tool wrote."""
    path = os.fspath(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.is_dir() and keep(info.filename):
                    yield info.filename, archive.read(info)
        return
    if _is_rar(path):
        yield from _rar_members(path, keep)
        return
    try:
        archive = tarfile.open(path, "r|*")  # noqa: SIM115 (a stream: closed by the `with` below)
    except tarfile.TarError as exc:
        raise StableDatasetsError(f"{path}: not a tar, zip or RAR archive ({exc})") from None
    with archive:
        for member in archive:
            if member.isfile() and keep(member.name):
                fh = archive.extractfile(member)
                assert fh is not None  # a regular file always has a reader
                yield member.name, fh.read()


def read_member(path: str | os.PathLike, name: str) -> bytes:
    """The bytes of the member called `name` (a label or list file); stops reading at it. A missing member is an
    error naming the archive and the member."""
    for _, data in stream_members(path, lambda member: member == name):
        return data
    raise StableDatasetsError(f"{os.fspath(path)} lacks the member {name!r}")


def folder_label(name: str, labels: Mapping[str, int], *, depth: int = 2, where: str | None = None) -> int | None:
    """The label of `labels` named by the folder `depth - 1` levels above the file ("a/rock/x.png" -> "rock" for
    depth 2); None when that folder is not a class (a stray file or folder), or an error naming `where` (the
    archive) when one is given."""
    parts = name.split("/")
    label = labels.get(parts[-depth]) if len(parts) >= depth else None
    if label is None and where is not None:
        raise StableDatasetsError(f"{where}: member {name!r} is in no known class folder")
    return label


def lines_of(data: bytes) -> list[str]:
    """The non-empty lines of a text side file (list of images, labels), stripped."""
    return [line.strip() for line in data.decode("utf-8").splitlines() if line.strip()]


def _is_rar(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(RAR_SIGNATURE)) == RAR_SIGNATURE


def _rar_members(path: str, keep: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """RAR members through rarfile (the `formats` extra). Stored members are read by rarfile itself; compressed
    ones need one of the tools it drives (unrar, unar, 7z or bsdtar) on PATH."""
    try:
        import rarfile
    except ImportError:
        raise missing_extra(f"reading {path} (a RAR archive)", "rarfile", "formats") from None
    try:
        with rarfile.RarFile(path) as archive:
            for info in archive.infolist():
                name = info.filename.replace("\\", "/")
                if not info.is_dir() and keep(name):
                    yield name, archive.read(info)
    except rarfile.Error as exc:
        raise StableDatasetsError(f"{path}: cannot read this RAR archive ({type(exc).__name__}: {exc}); "
                                  "compressed RAR members need unrar, unar, 7z or bsdtar installed") from None
