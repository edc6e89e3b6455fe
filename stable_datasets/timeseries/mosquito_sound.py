"""MosquitoSound (UEA/UCR time-series archive): audio-derived series of wingbeat sounds of mosquito species,
from the archive's ARFF files (`MosquitoSound_TRAIN.arff`, `MosquitoSound_TEST.arff`), read as a stream."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features
from stable_datasets.timeseries._shared import series_feature
from stable_datasets.timeseries._uea import UEA_CITATION, UEAArchiveBuilder, uea_url

# no public record of this zip's sha256 or size, nor of the split sizes, was found
_ZIP = DownloadInfo(uea_url("MosquitoSound"))


class MosquitoSound(UEAArchiveBuilder):
    """MosquitoSound; `series` is float32 `[length, 1]`."""

    VERSION = Version("1.0.0")
    UEA_NAME = "MosquitoSound"
    SOURCE = DatasetSource(homepage="http://www.timeseriesclassification.com/description.php?Dataset=MosquitoSound",
                           assets={"train": _ZIP, "test": _ZIP}, citation=UEA_CITATION)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="MosquitoSound: wingbeat sounds of mosquito species, as series (UEA/UCR time-series archive).",
            features=Features({"series": series_feature(), "label": ClassLabel(num_classes=2)}),
            supervised_keys=("series", "label"),
        )
