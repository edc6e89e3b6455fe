"""The blending index kept on disk (stable_datasets.megatron.blend_cache): the saved arrays equal the computed ones,
a second process loads them memory-mapped instead of computing, processes racing on one folder compute once and
leave one pair of files, a damaged file is computed again and replaced (with a warning naming it), and the files are
named by the weights and size."""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest

from stable_datasets.megatron import BlendedBlocks, blended_token_blocks, write_indexed_dataset
from stable_datasets.megatron.blend import normalise
from stable_datasets.megatron.blend_cache import blend_cache_files, cached_blending_indices
from stable_datasets.megatron.blend_index import blending_indices

SHARES = normalise([3, 1, 2])
SIZE = 20_000


def _npy(folder):
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".npy")


def _assert_exact(ours, theirs):
    assert ours[0].dtype == np.int16 and ours[1].dtype == np.int64
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


def test_the_saved_arrays_equal_the_computed_ones_and_a_second_call_loads_them(tmp_path):
    first = cached_blending_indices(SHARES, SIZE, tmp_path)
    _assert_exact(first, blending_indices(SHARES, SIZE))
    files = blend_cache_files(SHARES, SIZE, tmp_path)
    assert _npy(tmp_path) == sorted(p.name for p in files.values())
    assert all(p.name.startswith("blend-") for p in files.values())
    for path, array in zip(files.values(), blending_indices(SHARES, SIZE)):  # the files themselves, read plainly
        np.testing.assert_array_equal(np.load(path, allow_pickle=False), array)
    before = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in files.values()}
    second = cached_blending_indices(SHARES, SIZE, tmp_path)
    assert {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in files.values()} == before  # not written again
    assert all(isinstance(a, np.memmap) for a in second)  # loaded, memory-mapped
    _assert_exact(second, blending_indices(SHARES, SIZE))


def test_no_cache_dir_computes_in_memory_and_writes_nothing(tmp_path):
    arrays = cached_blending_indices(SHARES, 100, None)
    assert not any(isinstance(a, np.memmap) for a in arrays)
    _assert_exact(arrays, blending_indices(SHARES, 100))
    assert list(tmp_path.iterdir()) == []


def test_different_weights_or_sizes_get_different_files(tmp_path):
    cached_blending_indices(SHARES, 1000, tmp_path)
    cached_blending_indices(SHARES, 1001, tmp_path)
    cached_blending_indices(normalise([1, 3, 2]), 1000, tmp_path)
    assert len(_npy(tmp_path)) == 6
    _assert_exact(cached_blending_indices(SHARES, 1001, tmp_path), blending_indices(SHARES, 1001))
    _assert_exact(cached_blending_indices(normalise([1, 3, 2]), 1000, tmp_path),
                  blending_indices(normalise([1, 3, 2]), 1000))


def _damage_by_truncating(path):
    os.truncate(path, os.path.getsize(path) - 8)


def _damage_by_dtype(path):
    np.save(path, np.load(path).astype(np.int32), allow_pickle=False)


def _damage_by_length(path):
    np.save(path, np.load(path)[:-1], allow_pickle=False)


@pytest.mark.parametrize("array", ["dataset_index", "dataset_sample_index"])
@pytest.mark.parametrize("damage", [_damage_by_truncating, _damage_by_dtype, _damage_by_length])
def test_a_damaged_file_is_computed_again_and_replaced_with_a_warning(tmp_path, warnings_logged, array, damage):
    cached_blending_indices(SHARES, SIZE, tmp_path)
    path = blend_cache_files(SHARES, SIZE, tmp_path)[array]
    damage(path)
    again = cached_blending_indices(SHARES, SIZE, tmp_path)
    _assert_exact(again, blending_indices(SHARES, SIZE))
    assert len(warnings_logged) == 1 and str(path) in warnings_logged[0]
    _assert_exact(tuple(np.load(p, allow_pickle=False) for p in blend_cache_files(SHARES, SIZE, tmp_path).values()),
                  blending_indices(SHARES, SIZE))  # replaced whole on disk
    assert len(_npy(tmp_path)) == 2 and not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def _build_in_a_process(folder):
    """One process of the race: its arrays, and whether it computed them (the log says so) rather than loaded."""
    from loguru import logger

    messages = []
    logger.add(lambda m: messages.append(str(m)), level="INFO")
    arrays = cached_blending_indices(SHARES, SIZE, folder)
    return np.array(arrays[0]), np.array(arrays[1]), any("computing the blending index" in m for m in messages)


def test_processes_racing_on_one_folder_compute_once_and_share_one_pair_of_files(tmp_path):
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(_build_in_a_process, [tmp_path, tmp_path])
    assert [computed for _, _, computed in results].count(True) == 1  # the other waited on the lock, then loaded
    for index, sample, _ in results:
        _assert_exact((index, sample), blending_indices(SHARES, SIZE))
    assert _npy(tmp_path) == sorted(p.name for p in blend_cache_files(SHARES, SIZE, tmp_path).values())
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


@pytest.fixture(scope="module")
def prefixes(tmp_path_factory):
    folder, rng = tmp_path_factory.mktemp("blend"), np.random.default_rng(1)
    docs = [[[*rng.integers(1, 1000, int(rng.integers(1, 30))).tolist(), 0] for _ in range(n)] for n in (40, 60)]
    return [write_indexed_dataset(d, folder / f"p{i}").path_prefix for i, d in enumerate(docs)]


def test_blended_blocks_and_the_stream_take_cache_dir(tmp_path, prefixes):
    plain = BlendedBlocks(prefixes, [1, 2], 8, seed=0, size=50)
    cached = BlendedBlocks(prefixes, [1, 2], 8, seed=0, size=50, cache_dir=tmp_path)
    assert isinstance(cached.dataset_index, np.memmap) and len(_npy(tmp_path)) == 2
    _assert_exact((cached.dataset_index, cached.dataset_sample_index),
                  (plain.dataset_index, plain.dataset_sample_index))
    assert [cached[i]["tokens"].tolist() for i in range(len(plain))] == [plain[i]["tokens"].tolist()
                                                                         for i in range(len(plain))]
    stream = blended_token_blocks(prefixes, [1, 2], 8, seed=0, size=60, cache_dir=tmp_path / "stream")
    assert len(_npy(tmp_path / "stream")) == 2
    assert [s["tokens"].tolist() for s in stream] == [s["tokens"].tolist()
                                                      for s in blended_token_blocks(prefixes, [1, 2], 8, seed=0,
                                                                                    size=60)]
