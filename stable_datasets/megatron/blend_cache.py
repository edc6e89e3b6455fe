"""The blending index kept on disk, so that every rank of a job loads it instead of computing it again.

A pretraining blend of 10^9 samples takes minutes and ~10 GB (int16 + int64 per sample) to compute
(`blend_index`); Megatron-Core's `BlendedDataset` with `path_to_cache` has rank 0 build and save it and the other
ranks load it, memory-mapped. Here any process may be first: in `cache_dir`, the pair

    blend-<hash>.dataset_index.npy         int16, one entry per sample
    blend-<hash>.dataset_sample_index.npy  int64, one entry per sample

is named by a hash of (format version, the normalised shares' repr, size). The first process to find it missing
takes `blend-<hash>.lock` (a `filelock`), computes, writes each file under a temporary name in the same folder,
fsyncs and renames it (the sample index last: its presence means both are whole); the others wait on the lock and
then load. Loads are memory-mapped (`np.load(mmap_mode="r", allow_pickle=False)`), so ranks on one machine share the
pages, and ranks of many machines share one copy when `cache_dir` is on a shared disk.

A damaged pair (unreadable, wrong dtype or length: a copy cut short, a file from elsewhere) is never served: it is
computed again under the lock and replaced, with a warning naming the file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from loguru import logger

from stable_datasets.cache.lock import exclusive_lock
from stable_datasets.cache.publish import fsync_path
from stable_datasets.megatron.blend_index import blending_indices

#: bump when the files' meaning or layout changes, so old files are never read as new ones
FORMAT_VERSION = 1
_DTYPES = {"dataset_index": np.dtype(np.int16), "dataset_sample_index": np.dtype(np.int64)}


def blend_cache_files(shares: Sequence[float], size: int, cache_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """The two `.npy` files (by array name) that hold the blending index of `shares` (normalised) and `size`."""
    key = repr(("megatron_blend_index", FORMAT_VERSION, [float(s) for s in shares], int(size)))
    name = "blend-" + hashlib.sha256(key.encode()).hexdigest()[:32]
    return {array: Path(cache_dir) / f"{name}.{array}.npy" for array in _DTYPES}


def cached_blending_indices(shares: Sequence[float], size: int, cache_dir: str | os.PathLike[str] | None = None
                            ) -> tuple[np.ndarray, np.ndarray]:
    """`blending_indices(shares, size)`, kept in `cache_dir` (module docstring): loaded memory-mapped when there,
    else computed once across processes and saved. `cache_dir=None` computes in memory, keeping nothing."""
    if cache_dir is None or size == 0:  # (an empty array cannot be memory-mapped)
        return blending_indices(shares, size)
    files = blend_cache_files(shares, size, cache_dir)
    loaded = _load(files, size, warn=False)  # the common case: another process already saved it
    if loaded is not None:
        return loaded
    sample_file = files["dataset_sample_index"]
    with exclusive_lock(sample_file.parent / (sample_file.name.split(".")[0] + ".lock")):
        loaded = _load(files, size, warn=True)  # saved while this process waited for the lock, or damaged
        if loaded is not None:
            return loaded
        logger.info("computing the blending index of {} samples into {}", size, sample_file.name)  # no absolute path
        arrays = dict(zip(_DTYPES, blending_indices(shares, size)))
        for stale in sample_file.parent.glob(f".{sample_file.name.split('.')[0]}.*.tmp"):  # a killed writer's
            stale.unlink(missing_ok=True)
        for array, path in files.items():  # the sample index last: its presence means both are whole
            _save(arrays[array], path)
        fsync_path(sample_file.parent)
        del arrays  # the saved copy is served, memory-mapped, as to every other process
        loaded = _load(files, size, warn=True)
    if loaded is None:
        raise OSError(f"the blending index saved to {sample_file} does not read back whole")
    return loaded


def _save(values: np.ndarray, path: Path) -> None:
    """`values` to `path` whole or not at all: a temporary name in the same folder, fsynced, then renamed."""
    temporary = path.parent / f".{path.name}.{os.getpid()}.tmp"
    with open(temporary, "wb") as out:
        np.save(out, values, allow_pickle=False)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)


def _load(files: dict[str, Path], size: int, *, warn: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Both arrays memory-mapped, or None when the pair is missing or damaged (warned about when `warn`)."""
    if not files["dataset_sample_index"].exists():
        return None
    arrays = []
    for array, path in files.items():
        try:
            values = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError) as error:
            fault = f"does not read ({error})"
        else:
            if values.dtype == _DTYPES[array] and values.shape == (size,):
                arrays.append(values)
                continue
            fault = f"holds {values.dtype} of shape {values.shape}, not {_DTYPES[array]} of shape ({size},)"
        if warn:
            logger.warning("blending index file {} {}; computing it again", path, fault)
        return None
    return arrays[0], arrays[1]
