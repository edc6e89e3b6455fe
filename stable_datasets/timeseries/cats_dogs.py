"""CatsDogs (UEA/UCR time-series archive): audio-derived series of cats and dogs barking and meowing,
from the archive's ARFF files (`CatsDogs_TRAIN.arff`, `CatsDogs_TEST.arff`), read as a stream."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features
from stable_datasets.timeseries._shared import series_feature
from stable_datasets.timeseries._uea import UEA_CITATION, UEAArchiveBuilder, uea_url

# no public record of this zip's sha256 or size, nor of the split sizes, was found
_ZIP = DownloadInfo(uea_url("CatsDogs"))


class CatsDogs(UEAArchiveBuilder):
    """CatsDogs; `series` is float32 `[length, 1]`."""

    VERSION = Version("1.0.0")
    UEA_NAME = "CatsDogs"
    SOURCE = DatasetSource(homepage="http://www.timeseriesclassification.com/description.php?Dataset=CatsDogs",
                           assets={"train": _ZIP, "test": _ZIP}, citation=UEA_CITATION)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="CatsDogs: cats and dogs barking and meowing, as series (UEA/UCR time-series archive).",
            features=Features({"series": series_feature(), "label": ClassLabel(names=["cat", "dog"])}),
            supervised_keys=("series", "label"),
        )
