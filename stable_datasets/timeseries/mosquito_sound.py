"""MosquitoSound (UEA/UCR time-series archive): audio-derived series of wingbeat sounds of six mosquito species
(Aedes aegypti, Ae. albopictus, Anopheles arabiensis, An. gambiae, Culex pipiens, C. quinquefasciatus), from the
archive's ARFF files (`MosquitoSound_TRAIN.arff`, `MosquitoSound_TEST.arff`), read as a stream.

Upstream declares `ClassLabel(num_classes=2)`, which the archive's six classes do not fit (class ids 2-5 would be
out of range); this module declares 6, numbered in the ARFF class attribute's declared order, as upstream numbers
them."""

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
            description="MosquitoSound: wingbeat sounds of six mosquito species, as series (UEA/UCR time-series "
                        "archive).",
            features=Features({"series": series_feature(), "label": ClassLabel(num_classes=6)}),
            supervised_keys=("series", "label"),
        )
