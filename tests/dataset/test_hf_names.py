"""Hugging Face's everyday names (issue 37 item 5), each checked against HF `datasets` side by side:
`sds.Dataset`, `to_iterable_dataset`, `split_dataset_by_node`, `Image(decode=False)`, `flatten`,
`cleanup_cache_files`, `with_format(output_all_columns=)`, `DatasetDict.shuffle(seeds=)`, torch float32,
and `concatenate_datasets` of an HF dataset."""

from __future__ import annotations

import io

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets import StableDataset

datasets = pytest.importorskip("datasets")
torch = pytest.importorskip("torch")

COLUMNS = {"a": [1.5, 2.5, 3.5], "b": [1, 2, 3], "s": ["x", "y", "z"]}


def _plain(value):
    """Tensors and arrays as (dtype name, list) so ours and HF's compare exactly."""
    if isinstance(value, torch.Tensor):
        return str(value.dtype), value.tolist()
    if isinstance(value, np.ndarray):
        return str(value.dtype), value.tolist()
    if isinstance(value, np.generic):
        return str(value.dtype), value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def test_sds_dataset_is_stable_dataset():
    assert sds.Dataset is StableDataset
    assert isinstance(sds.Dataset.from_dict({"x": [1]}), sds.Dataset)


def test_torch_format_gives_float32_for_float_columns_as_hf():
    ours, theirs = StableDataset.from_dict(COLUMNS), datasets.Dataset.from_dict(COLUMNS)
    for key in (0, slice(0, 2)):
        assert _plain(ours.with_format("torch")[key]) == _plain(theirs.with_format("torch")[key])
    assert _plain(ours.with_format("torch")[0]) == {"a": ("torch.float32", 1.5), "b": ("torch.int64", 1), "s": "x"}
    rows = ours.with_format("torch").__getitems__([0, 2])  # the DataLoader's batch read
    assert [str(r["a"].dtype) for r in rows] == ["torch.float32", "torch.float32"]
    # the switch: HF's dtype= gives every numeric tensor that dtype
    kept = ours.with_format("torch", dtype=torch.float64)[:2]
    assert _plain(kept) == _plain(theirs.with_format("torch", dtype=torch.float64)[:2])
    assert _plain(kept)["a"] == ("torch.float64", [1.5, 2.5])
    with pytest.raises(TypeError, match="'torch' only"):
        ours.with_format("numpy", dtype=torch.float64)


def test_with_format_output_all_columns_as_hf():
    ours, theirs = StableDataset.from_dict(COLUMNS), datasets.Dataset.from_dict(COLUMNS)
    for kind in ("torch", "numpy"):
        mine = ours.with_format(kind, columns=["b"], output_all_columns=True)
        hf = theirs.with_format(kind, columns=["b"], output_all_columns=True)
        assert _plain(mine[1]) == _plain(hf[1])
        assert _plain(mine[0:2]) == _plain(hf[0:2])
        assert list(mine[0]) == list(hf[0]) == ["b", "a", "s"]
    mine = ours.with_format("torch", columns=["b"], output_all_columns=True)
    assert _plain(mine[1]) == {"b": ("torch.int64", 2), "a": 2.5, "s": "y"}  # the others as Python values
    assert mine.format["output_all_columns"] is True
    assert list(ours.with_format("torch", columns=["b"])[0]) == ["b"]  # without it: only the columns
    ours.set_format("torch", columns=["b"], output_all_columns=True)
    assert _plain(ours[2]) == {"b": ("torch.int64", 3), "a": 3.5, "s": "z"}
    ours.reset_format()
    assert ours[2] == {"a": 3.5, "b": 3, "s": "z"}


def test_dataset_dict_shuffle_seeds_per_split_as_hf():
    columns = {"x": list(range(20))}
    ours = sds.DatasetDict(train=StableDataset.from_dict(columns), test=StableDataset.from_dict(columns))
    theirs = datasets.DatasetDict(train=datasets.Dataset.from_dict(columns), test=datasets.Dataset.from_dict(columns))
    for kwargs in ({"seeds": {"train": 1, "test": 2}}, {"seeds": 3}, {"seed": 4}):
        mine, hf = ours.shuffle(**kwargs), theirs.shuffle(**kwargs)
        assert {k: v["x"] for k, v in mine.items()} == {k: list(v["x"]) for k, v in hf.items()}
    mine = ours.shuffle(seeds={"train": 1, "test": 2})
    assert mine["train"]["x"] != mine["test"]["x"]
    generators = {"train": np.random.default_rng(7), "test": np.random.default_rng(8)}
    hf = theirs.shuffle(generators={"train": np.random.default_rng(7), "test": np.random.default_rng(8)})
    assert ours.shuffle(generators=generators)["test"]["x"] == list(hf["test"]["x"])
    with pytest.raises(KeyError, match=r"no split\(s\) \['valid'\]"):
        ours.shuffle(seeds={"valid": 1})


def test_split_dataset_by_node_as_hf():
    from datasets.distributed import split_dataset_by_node as hf_split

    columns = {"x": list(range(10))}
    ours, theirs = StableDataset.from_dict(columns), datasets.Dataset.from_dict(columns)
    parts = [sds.split_dataset_by_node(ours, rank=r, world_size=3)["x"] for r in range(3)]
    assert parts == [list(hf_split(theirs, rank=r, world_size=3)["x"]) for r in range(3)]
    assert parts == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 3\), got 3"):
        sds.split_dataset_by_node(ours, rank=3, world_size=3)
    # a stream: each rank its own rows, all rows once
    stream = ours.to_iterable_dataset()
    ranks = [[row["x"] for row in sds.split_dataset_by_node(stream, rank=r, world_size=2)] for r in range(2)]
    assert sorted(ranks[0] + ranks[1]) == list(range(10)) and not set(ranks[0]) & set(ranks[1])
    assert all(ranks)


def test_to_iterable_dataset_streams_every_row():
    ds = StableDataset.from_dict({"x": list(range(7))})
    stream = ds.to_iterable_dataset(num_shards=4)
    assert [row["x"] for row in stream] == list(range(7))
    assert type(stream) is type(ds.to_iterable())


def test_image_decode_false_gives_hfs_bytes_dict():
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.fromarray(np.full((3, 4, 3), 200, np.uint8)).save(buffer, format="PNG")
    png = buffer.getvalue()
    ours = StableDataset.from_dict({"img": [png]}, features={"img": sds.Image(decode=False)})
    theirs = datasets.Dataset.from_dict({"img": [{"bytes": png, "path": None}]},
                                        features=datasets.Features({"img": datasets.Image(decode=False)}))
    assert ours[0]["img"] == theirs[0]["img"] == {"bytes": png, "path": None}
    assert ours[:1]["img"] == theirs[:1]["img"]
    assert ours.features["img"].to_dict()["decode"] is False
    assert sds.Features.from_dict(theirs.features.to_dict())["img"] == sds.Image(decode=False)
    assert sds.Image() != sds.Image(decode=False)  # another read, another feature
    back = ours.to_hf()  # and back to Hugging Face as its Image(decode=False)
    assert back.features["img"].decode is False and back[0]["img"]["bytes"] == png
    assert "decode" not in sds.Image().to_dict()  # caches made before keep their fingerprint
    assert StableDataset.from_dict({"img": [png]}, features={"img": sds.Image()})[0]["img"].shape == (3, 4, 3)


def test_flatten_struct_columns_as_hf():
    columns = {"a": [{"b": 1, "c": {"d": "x"}}, {"b": 2, "c": {"d": "y"}}], "e": [0.5, 1.5]}
    ours, theirs = StableDataset.from_dict(columns).flatten(), datasets.Dataset.from_dict(columns).flatten()
    assert ours.column_names == theirs.column_names == ["a.b", "a.c.d", "e"]
    assert ours[:] == theirs[:] == {"a.b": [1, 2], "a.c.d": ["x", "y"], "e": [0.5, 1.5]}
    assert str(ours.features["a.c.d"]) == str(sds.Value("string"))
    flat = StableDataset.from_dict({"x": [1]})
    assert flat.flatten() is flat  # nothing to flatten


def test_cleanup_cache_files_removes_superseded_builds_only(cache_root):
    ds = StableDataset.from_dict({"x": [1, 2]})
    build = ds.cache_dirs[0]
    old = build.parent / (build.name.split("@")[0] + "@" + "0" * 16)
    old.mkdir()
    (old / "shard.arrow").write_bytes(b"old")
    assert ds.cleanup_cache_files() == 1
    assert not old.exists() and build.exists() and ds[1] == {"x": 2}
    assert ds.cleanup_cache_files() == 0
    assert datasets.Dataset.from_dict({"x": [1]}).cleanup_cache_files() == 0  # HF's: an int, 0 in memory


def test_concatenate_datasets_of_an_hf_dataset_says_how_to_convert():
    ours = StableDataset.from_dict({"x": [1]})
    theirs = datasets.Dataset.from_dict({"x": [2]})
    with pytest.raises(TypeError, match=r"dataset 1 is a Hugging Face datasets.Dataset, not a StableDataset; "
                                        r"convert it with sds.StableDataset.from_hf\(it\)"):
        sds.concatenate_datasets([ours, theirs])
    assert sds.concatenate_datasets([ours, StableDataset.from_hf(theirs)])["x"] == [1, 2]
    with pytest.raises(TypeError, match="dataset 0 is a dict, not a StableDataset"):
        sds.concatenate_datasets([{"x": [1]}])
