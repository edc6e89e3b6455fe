"""`sds.interleave_datasets` for StableDatasets: Hugging Face's rows, in HF's order, as a view; clear errors."""

from __future__ import annotations

import pytest

import stable_datasets as sds

hf = pytest.importorskip("datasets")

SIZES = (3, 4, 5)


@pytest.fixture
def sources():
    return [sds.StableDataset.from_dict({"x": list(range(100 * i, 100 * i + n))}) for i, n in enumerate(SIZES)]


@pytest.mark.parametrize("probabilities,seed", [(None, None), ([0.2, 0.3, 0.5], 42), ([0.7, 0.2, 0.1], 0),
                                                ([0.0, 0.5, 0.5], 3)])
@pytest.mark.parametrize("strategy", ["first_exhausted", "all_exhausted"])
def test_rows_and_order_are_hugging_faces(sources, probabilities, seed, strategy):
    if strategy == "all_exhausted" and probabilities and 0.0 in probabilities:
        with pytest.raises(ValueError, match=r"cannot exhaust a dataset that is never drawn: datasets at indices \[0"):
            sds.interleave_datasets(sources, probabilities, seed, strategy)
        return
    theirs = hf.interleave_datasets([hf.Dataset.from_dict({"x": s["x"]}) for s in sources],
                                    probabilities=probabilities, seed=seed, stopping_strategy=strategy)
    ours = sds.interleave_datasets(sources, probabilities=probabilities, seed=seed, stopping_strategy=strategy)
    assert isinstance(ours, sds.StableDataset)
    assert ours["x"] == list(theirs["x"])


def test_the_documented_orders(sources):
    assert sds.interleave_datasets(sources)["x"] == [0, 100, 200, 1, 101, 201, 2, 102, 202]
    assert sds.interleave_datasets(sources, stopping_strategy="all_exhausted")["x"] == [
        0, 100, 200, 1, 101, 201, 2, 102, 202, 0, 103, 203, 1, 100, 204]  # shorter sources start over


def test_the_mix_is_a_view_of_the_sources_not_a_copy(sources):
    mixed = sds.interleave_datasets(sources, probabilities=[0.2, 0.3, 0.5], seed=1)
    names = sorted(f["filename"] for s in sources for f in s.cache_files)
    assert sorted(f["filename"] for f in mixed.cache_files) == names
    assert all(f["view"] for f in mixed.cache_files)  # it serves fewer rows than the files hold


def test_bad_input_is_a_clear_error(sources):
    with pytest.raises(ValueError, match=r"probabilities must sum to 1, got 0.9"):
        sds.interleave_datasets(sources, probabilities=[0.2, 0.3, 0.4])
    with pytest.raises(ValueError, match="probabilities has 2 entries for 3 datasets"):
        sds.interleave_datasets(sources, probabilities=[0.5, 0.5])
    with pytest.raises(ValueError, match="probabilities must be finite and >= 0"):
        sds.interleave_datasets(sources, probabilities=[1.5, -0.5, 0.0])
    with pytest.raises(ValueError, match="stopping_strategy must be one of first_exhausted, all_exhausted"):
        sds.interleave_datasets(sources, stopping_strategy="sometimes")
    other = sds.StableDataset.from_dict({"x": ["a", "b"]})
    with pytest.raises(ValueError, match="different features: dataset 1's column 'x' is"):
        sds.interleave_datasets([sources[0], other])
    extra = sds.StableDataset.from_dict({"x": [1], "y": [2]})
    with pytest.raises(ValueError, match="dataset 1's column 'y' is in this dataset only"):
        sds.interleave_datasets([sources[0], extra])
    with pytest.raises(TypeError, match="mixes StableDatasets or streams"):
        sds.interleave_datasets([sources[0], sources[1].to_iterable()])
    with pytest.raises(ValueError, match="needs at least one dataset"):
        sds.interleave_datasets([])
