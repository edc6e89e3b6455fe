"""The front door: every keyword of `load_dataset` reaches the build, with `streaming=False` and `True` alike."""

from __future__ import annotations

import gc

import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from tests.conftest import TOY_BUILDER


def test_cache_limit_is_honoured_with_streaming(write_builder):
    """It was dropped on the way to the build with streaming=True: nothing was evicted."""
    script = write_builder("toy", TOY_BUILDER)
    first = sds.load_dataset(str(script), split="train", rows=20)
    folder = published_path(first.cache_dirs[0])
    size = sum(s.num_bytes for s in first.cache_metadata[0].shards)
    del first
    gc.collect()
    stream = sds.load_dataset(str(script), split="train", rows=21, cache_limit=size + 10, streaming=True)
    assert not folder.exists()  # no room for both: the least recently used went
    assert [row["id"] for row in stream][:3] == [0, 1, 2] and len(stream) == 21


CONFIGS_BUILDER = TOY_BUILDER.replace(
    "    BUILDER_CONFIG_CLASS = ToyConfig\n",
    "    BUILDER_CONFIG_CLASS = ToyConfig\n"
    "    BUILDER_CONFIGS = [ToyConfig(name='small', rows=5), ToyConfig(name='big', rows=9)]\n")


class ReachedTheBuild(Exception):
    """Raised by the spy on `prepare_splits` once it has recorded what the build was given: nothing is built."""


#: every keyword of `load_dataset` (besides `path`, `split`, `streaming` and the builder's own config keywords): a
#: value other than its default, and where the build sees it: on the options value `prepare_splits` receives,
#: or on the builder it is called on. A keyword added to `load_dataset` without an entry here fails
#: test_every_keyword_has_an_entry.
REACHES = {
    "name": ("big", lambda builder, options: builder.config.name),
    "storage_format": ("lance", lambda builder, options: options.storage_format),
    "cache_dir": ("elsewhere", lambda builder, options: builder.cache_root.name),
    "download_mode": ("force_rebuild", lambda builder, options: options.download_mode),
    "verification_mode": ("no_checks", lambda builder, options: options.verification_mode),
    "num_proc": (3, lambda builder, options: options.num_proc),
    "engine": ("ray", lambda builder, options: options.engine),
    "ray_address": ("ray://head:10001", lambda builder, options: options.ray_address),
    "layout_options": ({"shard_rows": 7}, lambda builder, options: dict(options.layout_options)),
    "storage_options": ({"anon": True}, lambda builder, options: builder.input_storage_options["*"]),
    "cache_limit": ("20GB", lambda builder, options: options.cache_limit),
}
NOT_BUILD_OPTIONS = {"path", "split", "streaming", "config_kwargs"}


def test_every_keyword_has_an_entry():
    import inspect

    keywords = set(inspect.signature(sds.load_dataset).parameters) - NOT_BUILD_OPTIONS
    assert keywords == set(REACHES)


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("split", ["train", "train[:3]", "train+test", None])
def test_every_keyword_reaches_the_build(write_builder, monkeypatch, tmp_path, streaming, split):
    from stable_datasets.builder.builder import DatasetBuilder

    script = write_builder("toy", CONFIGS_BUILDER)
    seen: list = []

    def spy(builder, splits, options):
        seen.append({keyword: where(builder, options) for keyword, (_, where) in REACHES.items()})
        raise ReachedTheBuild

    monkeypatch.setattr(DatasetBuilder, "prepare_splits", spy)
    values = {keyword: value for keyword, (value, _) in REACHES.items()}
    values["cache_dir"] = tmp_path / values["cache_dir"]
    with pytest.raises(ReachedTheBuild):
        sds.load_dataset(str(script), split=split, streaming=streaming, **values)
    assert seen == [{**values, "cache_dir": "elsewhere"}]
