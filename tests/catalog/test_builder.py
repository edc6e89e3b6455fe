"""The catalog's base class: upstream's call shape, its DatasetSource/DownloadInfo spelling in a user's own
builder, row counts checked before publishing, manual downloads, where downloads go."""

from __future__ import annotations

import pytest

import stable_datasets as sds
from stable_datasets.errors import ManualDownloadError, SplitRowsError
from tests.fixtures.catalog import serve_urls

URL = "https://example.org/data/numbers-{}.txt"


class Numbers(sds.BaseDatasetBuilder):
    """A user's own builder in upstream's spelling: SOURCE assets by split, _generate_examples(data_path, split)."""

    VERSION = sds.Version("1.0.0")
    SOURCE = sds.DatasetSource(
        homepage="https://example.org/", citation="@misc{numbers}", license="CC0",
        assets={"train": sds.DownloadInfo(URL.format("train")), "val": URL.format("val")})

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"n": sds.Value("int64")}),
                               num_examples={"train": 3, "validation": 2})

    def _generate_examples(self, data_path, split):
        with open(data_path) as fh:
            for index, line in enumerate(fh):
                yield f"{split}:{index}", {"n": int(line)}


FILES = {URL.format("train"): b"1\n2\n3\n", URL.format("val"): b"7\n8\n"}


def test_calling_the_class_loads_a_split_or_all_with_upstream_names(monkeypatch, tmp_path):
    with serve_urls(monkeypatch, FILES):
        train = Numbers(split="train", processed_cache_dir=tmp_path / "processed", download_dir=tmp_path / "dl")
        every = Numbers(processed_cache_dir=tmp_path / "processed", download_dir=tmp_path / "dl")
    assert isinstance(train, sds.StableDataset) and train["n"] == [1, 2, 3]
    assert isinstance(every, sds.DatasetDict) and every["validation"]["n"] == [7, 8]  # upstream's "val"
    assert len(list((tmp_path / "dl").glob("*-numbers-train.txt"))) == 1  # downloads went to download_dir
    assert train.info.homepage == "https://example.org/" and train.info.license == "CC0"  # from the source
    builder = Numbers.create(cache_dir=tmp_path / "processed")
    assert isinstance(builder, Numbers) and builder.is_prepared("train")


def test_cache_dir_and_config_name_are_accepted_in_either_spelling_but_not_both(monkeypatch, tmp_path):
    with serve_urls(monkeypatch, FILES):
        train = Numbers(split="train", cache_dir=tmp_path / "c")  # load_dataset's name for processed_cache_dir
        again = sds.load_dataset(Numbers, split="train", config_name="default", cache_dir=tmp_path / "c")
    assert train["n"] == again["n"] == [1, 2, 3] and train.cache_dirs == again.cache_dirs
    assert train.cache_dirs[0].is_relative_to(tmp_path / "c")
    with pytest.raises(TypeError, match="pass processed_cache_dir= or cache_dir=, not both"):
        Numbers(split="train", cache_dir=tmp_path / "c", processed_cache_dir=tmp_path / "d")
    with pytest.raises(TypeError, match="pass the config as name= or config_name=, not both"):
        sds.load_dataset(Numbers, split="train", name="default", config_name="default")


def test_a_split_with_other_rows_than_promised_is_refused_before_publishing(monkeypatch):
    files = {**FILES, URL.format("train"): b"1\n2\n"}
    with serve_urls(monkeypatch, files), pytest.raises(SplitRowsError) as caught:
        Numbers(split="train")
    assert "split 'train': expected 3 rows, got 2; nothing was published" in str(caught.value)
    assert not Numbers.create().is_prepared("train")
    with serve_urls(monkeypatch, files):
        assert Numbers(split="train", verification_mode="no_checks")["n"] == [1, 2]


def test_checksums_in_upstream_spelling_are_checked():
    info = sds.DownloadInfo("https://x/y.bin", checksum="sha256:" + "ab" * 32, size=5)
    assert info.remote_file().sha256 == "ab" * 32 and info.remote_file().size == 5
    with pytest.raises(ValueError, match="checksum must be 'sha256:<64 hex digits>'"):
        sds.DownloadInfo("https://x/y.bin", checksum="md5:0123")


def test_unknown_backend_kwargs_are_refused_by_name():
    with pytest.raises(TypeError, match=r"unknown backend_kwargs \['nope'\]"):
        Numbers(split="train", backend_kwargs={"nope": 1})


class Gated(sds.BaseDatasetBuilder):
    VERSION = sds.Version("1.0.0")
    SOURCE = sds.DatasetSource(homepage="https://example.org/gated", citation="@misc{gated}", assets={})
    MANUAL_DOWNLOAD = "Download gated.txt from https://example.org/gated (an account is needed)."

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"line": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"folder": self.manual_folder()})]

    def _generate_examples(self, folder):
        with open(f"{folder}/gated.txt") as fh:
            for index, line in enumerate(fh):
                yield index, {"line": line.rstrip("\n")}


def test_manual_downloads_say_what_to_fetch_and_read_data_dir(tmp_path):
    with pytest.raises(ManualDownloadError, match=r"no data_dir was given\. Download gated\.txt from "):
        Gated(split="train")
    (tmp_path / "gated.txt").write_text("a\nb\n")
    assert Gated(split="train", manual_dir=str(tmp_path))["line"] == ["a", "b"]


class OldStyle(sds.BaseDatasetBuilder):
    """Upstream's `_split_generators(self)`, with no download manager argument."""

    VERSION = sds.Version("1.0.0")
    SOURCE = sds.DatasetSource(homepage="https://example.org/", citation="@misc{old}",
                               assets={"train": URL.format("train")})

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"n": sds.Value("int64")}))

    def _split_generators(self):
        path = self.dl_manager.download(self._source().remote_files()["train"])
        return [sds.SplitGenerator(name="train", gen_kwargs={"data_path": path})]

    def _generate_examples(self, data_path):
        with open(data_path) as fh:
            for index, line in enumerate(fh):
                yield index, {"n": int(line)}


def test_upstream_split_generators_without_arguments(monkeypatch):
    with serve_urls(monkeypatch, FILES):
        assert OldStyle(split="train")["n"] == [1, 2, 3]


def test_a_catalog_dataset_fingerprints_its_own_module_only():
    """Adding a dataset to the catalog (its package's __init__, a sibling module) rebuilds no other dataset."""
    from pathlib import Path

    import stable_datasets.images.cifar100 as module
    from stable_datasets.images import CIFAR100

    assert CIFAR100.create().source_text() == Path(module.__file__).read_text()
