"""GTZAN (Tzanetakis and Cook, 2002): 1,000 thirty-second 22,050 Hz clips of 10 music genres (100 each), read
member by member from the official genres.tar.gz (genres/<genre>/<genre>.<n>.wav). One split, `train`, in the
archive's order, as upstream."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.features import ClassLabel, Features, Value
from stable_datasets.timeseries._shared import series_feature, tar_files

LABELS = ["blues", "classical", "country", "disco", "hiphop", "jazz", "metal", "pop", "reggae", "rock"]
_INDEX = {name: i for i, name in enumerate(LABELS)}


class GTZAN(CatalogBuilder):
    """GTZAN music genres; `series` is the int16 samples as float32 `[T, 1]`."""

    VERSION = Version("1.0.0")
    TASK = "music genre classification"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="http://marsyas.info/downloads/datasets.html",
        # sha256 and size from TFDS's gtzan checksums.tsv (torchaudio records the same sha256)
        assets={"train": DownloadInfo(
            "http://opihi.cs.uvic.ca/sound/genres.tar.gz",
            checksum="sha256:24347e0223d2ba798e0a558c4c172d9d4a19c00bb7963fe055d183dadb4ef2c6", size=1225571541,
            filename="genres.tar.gz")},
        citation="""@article{tzanetakis2002musical,
  title={Musical genre classification of audio signals},
  author={Tzanetakis, George and Cook, Perry},
  journal={IEEE Transactions on Speech and Audio Processing},
  year={2002}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="GTZAN: thirty-second music clips, 100 for each of 10 genres.",
            features=Features({"series": series_feature(), "label": ClassLabel(names=LABELS),
                               "genre": Value("string"), "filename": Value("string")}),
            supervised_keys=("series", "label"),
            num_examples={"train": 1_000},
        )

    def _generate_examples(self, data_path, split):
        for name, data in tar_files(data_path, ".wav"):
            parts = name.split("/")
            if len(parts) < 2 or parts[-2] not in _INDEX:
                continue
            genre = parts[-2]
            yield name, {"series": read_series(data, name=f"{data_path}:{name}"), "label": _INDEX[genre],
                         "genre": genre, "filename": parts[-1]}
