"""AudioMNIST (Becker et al., 2023): 30,000 recordings of spoken digits 0-9 by 60 speakers, 48 kHz WAV, read from
the repository's zip (data/<speaker>/<digit>_<speaker>_<n>.wav) member by member, in sorted member order as
upstream. One split, `train`. `speaker_id` counts from 0 (the files count from 01)."""

from __future__ import annotations

import zipfile

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.features import ClassLabel, Features, Value
from stable_datasets.timeseries._shared import series_feature


class AudioMNIST(CatalogBuilder):
    """AudioMNIST spoken digits; `series` is the int16 samples as float32 `[T, 1]`."""

    VERSION = Version("1.0.0")
    TASK = "spoken digit classification"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://github.com/soerenab/AudioMNIST",
        # a GitHub branch archive: no fixed checksum or size is published for it
        assets={"train": DownloadInfo("https://github.com/soerenab/AudioMNIST/archive/master.zip",
                                      filename="AudioMNIST-master.zip")},
        citation="""@article{audiomnist2023,
  title = {AudioMNIST: Exploring Explainable Artificial Intelligence for audio analysis on a simple benchmark},
  journal = {Journal of the Franklin Institute},
  year = {2023},
  doi = {10.1016/j.jfranklin.2023.11.038},
  author = {S{\\"o}ren Becker and Johanna Vielhaben and Marcel Ackermann and Klaus-Robert M{\\"u}ller and
            Sebastian Lapuschkin and Wojciech Samek}}""",
        license="MIT",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="AudioMNIST: 50 recordings of each digit 0-9 by each of 60 speakers.",
            features=Features({"series": series_feature(), "label": ClassLabel(num_classes=10),
                               "speaker_id": Value("int32"), "utterance_id": Value("int32"),
                               "filename": Value("string")}),
            supervised_keys=("series", "label"),
            num_examples={"train": 30_000},
        )

    def _generate_examples(self, data_path, split):
        with zipfile.ZipFile(data_path) as archive:
            for name in sorted(archive.namelist()):
                if not name.lower().endswith(".wav"):
                    continue
                filename = name.rsplit("/", 1)[-1]
                fields = filename[:-4].split("_")
                if len(fields) != 3 or not all(f.isdigit() for f in fields):
                    continue
                digit, speaker, utterance = (int(f) for f in fields)
                yield filename, {"series": read_series(archive.read(name), name=f"{data_path}:{name}"),
                                 "label": digit, "speaker_id": speaker - 1, "utterance_id": utterance,
                                 "filename": filename}
