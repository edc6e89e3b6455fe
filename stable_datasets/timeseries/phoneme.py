"""Phoneme (UCR archive): 214 train / 1,896 test series of length 1,024, log-spectrogram rows of spoken phonemes in
39 classes, from the archive's ARFF files."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features
from stable_datasets.timeseries._shared import series_feature
from stable_datasets.timeseries._uea import UEA_CITATION, UEAArchiveBuilder, uea_url

# no public record of this zip's sha256 or size was found
_ZIP = DownloadInfo(uea_url("Phoneme"))


class Phoneme(UEAArchiveBuilder):
    """Phoneme; `series` is float32 `[1024, 1]`."""

    VERSION = Version("1.0.0")
    UEA_NAME = "Phoneme"
    SOURCE = DatasetSource(homepage="http://www.timeseriesclassification.com/description.php?Dataset=Phoneme",
                           assets={"train": _ZIP, "test": _ZIP}, citation=UEA_CITATION)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Phoneme: series derived from recordings of 39 phonemes (UCR time-series archive).",
            features=Features({"series": series_feature(), "label": ClassLabel(num_classes=39)}),
            supervised_keys=("series", "label"),
            num_examples={"train": 214, "test": 1_896},
        )
