"""What the catalog's timeseries builders share: the `series` feature (float32 `[T, C]`, of any length, as upstream
stores it) and a streaming walk over a tar archive's members (no backward seek into a gzip stream, one member in
memory at a time, nothing extracted to disk)."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterator

from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Sequence, Value


def series_feature() -> Sequence:
    """float32 `[T, C]`: T time steps (rows) of C channels, T varying from row to row."""
    return Sequence(Sequence(Value("float32")))


def tar_files(path: str | os.PathLike, suffix: str = "") -> Iterator[tuple[str, bytes]]:
    """(member name, bytes) of each regular member whose name ends with `suffix` (any case), in the archive's
    order, read as one stream."""
    suffix = suffix.lower()
    try:
        archive = tarfile.open(os.fspath(path), "r|*")  # noqa: SIM115 (closed by the `with` below)
    except tarfile.TarError as exc:
        raise StableDatasetsError(f"{os.fspath(path)}: not a tar archive ({exc})") from None
    with archive:
        for member in archive:
            if member.isfile() and member.name.lower().endswith(suffix):
                fh = archive.extractfile(member)
                assert fh is not None  # a regular file always has a reader
                yield member.name, fh.read()
