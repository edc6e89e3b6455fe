"""MATLAB `.mat` files: v4-v7 through scipy.io, v7.3 (HDF5) through h5py; both are extras. A `.mat` file is
read whole by scipy (the format has no streaming reader); v7.3 variables are read a slice at a time."""

from __future__ import annotations

import os
from typing import IO, Any

from stable_datasets.errors import missing_extra

#: the first bytes of an HDF5 file (a v7.3 .mat file is one, after its 512-byte MATLAB header)
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_hdf5(path: str | os.PathLike) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(1024)
    return head.startswith(HDF5_SIGNATURE) or head[512:520] == HDF5_SIGNATURE


def load_mat(path: str | os.PathLike | IO[bytes], variables: list[str] | None = None,
             **options: Any) -> dict[str, Any]:
    """The variables of a v4-v7 `.mat` file, or of a seekable file object (an archive member read in place), by
    scipy.io.loadmat (`options` go to it)."""
    source = path if hasattr(path, "read") else os.fspath(path)  # type: ignore[arg-type]
    try:
        import scipy.io
    except ImportError:
        what = getattr(path, "name", "a stream") if hasattr(path, "read") else os.fspath(path)  # type: ignore
        raise missing_extra(f"reading {what} (a MATLAB file)", "scipy", "formats") from None
    return scipy.io.loadmat(source, variable_names=variables, **options)


def open_hdf5(path: str | os.PathLike) -> Any:
    """An open h5py.File (a v7.3 `.mat` file or any HDF5 file); close it (or use it as a context manager)."""
    try:
        import h5py
    except ImportError:
        raise missing_extra(f"reading {os.fspath(path)} (an HDF5 file)", "h5py", "formats") from None
    return h5py.File(os.fspath(path), "r")
