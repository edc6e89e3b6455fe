"""Japanese Vowels (Kudo et al., 1999; UEA multivariate archive): 270 train / 370 test utterances of the vowels /ae/
by 9 male speakers, each a series of 7 to 29 frames of 12 LPC cepstrum coefficients, from the archive's `.ts` files.
As upstream, each series is padded with zeros to 29 frames (`series` float32 `[29, 12]`) and the speaker ids follow
the sorted class strings."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator

import numpy as np

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features
from stable_datasets.timeseries._shared import series_feature
from stable_datasets.timeseries._uea import UEA_CITATION, UEAArchiveBuilder, find_member, uea_url

SEQUENCE_LENGTH = 29
DIMENSIONS = 12
# no public record of this zip's sha256 or size was found
_ZIP = DownloadInfo(uea_url("JapaneseVowels"))


def read_ts(lines: Iterator[str], where: str) -> Iterator[tuple[list[np.ndarray], str]]:
    """(one float64 array per dimension, class string) for each case of a `.ts` file (sktime's format, without
    timestamps); `?` is NaN."""
    in_data = False
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            if line.lower().startswith("@timestamps") and line.split()[-1].lower() == "true":
                raise StableDatasetsError(f"{where}: .ts files with timestamps are not supported")
            in_data = line.lower().startswith("@data")
            continue
        *dims, label = line.split(":")
        try:
            arrays = [np.array(d.replace("?", "nan").split(","), dtype=np.float64) for d in dims]
        except ValueError:
            raise StableDatasetsError(f"{where}: line {number} holds a value that is not a number") from None
        yield arrays, label.strip()


class JapaneseVowels(UEAArchiveBuilder):
    """Japanese Vowels; `series` is float32 `[29, 12]`, zero-padded."""

    VERSION = Version("1.0.0")
    UEA_NAME = "JapaneseVowels"
    TASK = "multivariate time series classification (speaker)"
    SOURCE = DatasetSource(homepage="http://www.timeseriesclassification.com/description.php?Dataset=JapaneseVowels",
                           assets={"train": _ZIP, "test": _ZIP}, citation=UEA_CITATION)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Japanese Vowels: 12 LPC cepstrum coefficients per frame of nine speakers' uttered vowels.",
            features=Features({"series": series_feature(),
                               "label": ClassLabel(names=[f"speaker_{i}" for i in range(9)])}),
            supervised_keys=("series", "label"),
            num_examples={"train": 270, "test": 370},
        )

    def _generate_examples(self, data_path, split):
        with zipfile.ZipFile(data_path) as archive:
            member = find_member(archive, f"{self.UEA_NAME}_{split.upper()}.ts")
            where = f"{data_path}:{member}"
            with archive.open(member) as fh:
                cases = list(read_ts(io.TextIOWrapper(fh, encoding="utf-8"), where))  # 370 cases at most, ~100 KB
        ids = {name: i for i, name in enumerate(sorted({label for _, label in cases}))}
        for index, (dims, label) in enumerate(cases):
            series = np.zeros((SEQUENCE_LENGTH, len(dims)), dtype=np.float64)
            for d, values in enumerate(dims):
                kept = values[:SEQUENCE_LENGTH]
                series[: len(kept), d] = kept
            yield index, {"series": np.nan_to_num(series.astype(np.float32)), "label": ids[label]}
