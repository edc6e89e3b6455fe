"""FSDKaggle2018 (Fonseca et al., 2018): 9,473 train / 1,600 test clips of 41 everyday sound classes from Freesound,
44.1 kHz WAV, from the official Zenodo zips (audio read member by member in the archive's order; labels, Freesound
ids, manual verification and usage from the metadata zip's CSVs). Label ids follow the sorted label names, as
upstream."""

from __future__ import annotations

import csv
import io
import zipfile

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Value
from stable_datasets.timeseries._shared import series_feature

_RECORD = "https://zenodo.org/record/2552860/files/"
_RECORDS = "https://zenodo.org/records/2552860/files/"
_META_MEMBERS = {"train": "FSDKaggle2018.meta/train_post_competition.csv",
                 "test": "FSDKaggle2018.meta/test_post_competition_scoring_clips.csv"}


def _zenodo(name: str) -> DownloadInfo:
    # Zenodo publishes md5 digests only: no sha256 or size from a public record
    return DownloadInfo(f"{_RECORD}{name}?download=1", fallbacks=[_RECORDS + name], filename=name)


class FSDKaggle2018(CatalogBuilder):
    """FSDKaggle2018; `series` is the int16 samples as float32 `[T, 1]`."""

    VERSION = Version("1.0.0")
    TASK = "sound event classification"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://zenodo.org/records/2552860",
        assets={"train_audio": _zenodo("FSDKaggle2018.audio_train.zip"),
                "test_audio": _zenodo("FSDKaggle2018.audio_test.zip"), "meta": _zenodo("FSDKaggle2018.meta.zip")},
        citation="""@dataset{fonseca2019fsdkaggle2018,
  title={FSDKaggle2018},
  author={Fonseca, Eduardo and Plakal, Manoj and Font, Frederic and Ellis, Daniel P.W. and Serra, Xavier},
  year={2019},
  publisher={Zenodo},
  doi={10.5281/zenodo.2552860}}""",
        license="CC BY 4.0 (the clips: CC0, CC BY, CC BY-NC, as each one's Freesound licence)",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="FSDKaggle2018: Freesound clips of 41 classes of the AudioSet ontology, with the official "
                        "train/test split; `verified` says whether a train label was checked by hand, `usage` "
                        "whether a test clip was Public or Private in the Kaggle competition.",
            features=Features({"series": series_feature(), "label": ClassLabel(num_classes=41),
                               "filename": Value("string"), "fsid": Value("string"), "verified": Value("string"),
                               "usage": Value("string")}),
            supervised_keys=("series", "label"),
            num_examples={"train": 9_473, "test": 1_600},
        )

    def _split_generators(self, dl_manager):
        files = dl_manager.download(self._source().remote_files())
        return [SplitGenerator(split, {"audio_path": files[f"{split}_audio"], "meta_path": files["meta"],
                                       "split": split}) for split in ("train", "test")]

    def _generate_examples(self, audio_path, meta_path, split):
        metadata = _metadata(meta_path)
        label_ids = {name: i for i, name in enumerate(sorted({r["label"] for rows in metadata.values() for r in rows}))}
        rows = {row["fname"]: row for row in metadata[split]}
        with zipfile.ZipFile(audio_path) as archive:
            for name in archive.namelist():
                filename = name.rsplit("/", 1)[-1]
                if not name.lower().endswith(".wav") or filename not in rows:
                    continue
                row = rows[filename]
                yield filename, {"series": read_series(archive.read(name), name=f"{audio_path}:{name}"),
                                 "label": label_ids[row["label"]], "filename": filename, "fsid": row.get("fsID", ""),
                                 "verified": row.get("manually_verified", ""), "usage": row.get("usage", "")}


def _metadata(meta_path) -> dict[str, list[dict[str, str]]]:
    """Both splits' CSV rows (the label ids are numbered over both)."""
    out = {}
    with zipfile.ZipFile(meta_path) as archive:
        for split, member in _META_MEMBERS.items():
            try:
                fh = archive.open(member)
            except KeyError:
                raise StableDatasetsError(f"{meta_path} lacks the member {member}") from None
            with fh:
                out[split] = list(csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8")))
    return out
