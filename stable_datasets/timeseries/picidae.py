"""Picidae (woodpecker) sounds (Florentin et al., 2017): WAV recordings from xeno-canto of 7 European woodpecker
species' calls, drums and songs, plus background noise: 13 classes, one folder each, in the official zip. Rows in
sorted member order, as upstream; macOS resource forks (`._*`) are left out. One split, `train`."""

from __future__ import annotations

import zipfile

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.features import ClassLabel, Features, Value
from stable_datasets.timeseries._shared import series_feature

LABELS = [
    "BackgroundNoise", "DendrocoposLeucotos-call", "DendrocoposLeucotos-drumming", "DendrocoposMajor-call",
    "DendrocoposMajor-drumming", "DendrocoposMedius-call", "DendrocoposMedius-song", "DendrocoposMinor-call",
    "DendrocoposMinor-drumming", "DryocopusMartius-call", "DryocopusMartius-drumming", "JynxTorquilla-song",
    "PicusViridis-song",
]
_INDEX = {name: i for i, name in enumerate(LABELS)}


class Picidae(CatalogBuilder):
    """Picidae; `series` is the int16 samples as float32 `[T, 1]`; `xc_identifier` is the xeno-canto recording."""

    VERSION = Version("1.0.0")
    TASK = "bird sound classification"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://zenodo.org/records/574438",
        # Zenodo publishes md5 digests only: no sha256 or size from a public record
        assets={"train": DownloadInfo("https://zenodo.org/record/574438/files/PicidaeDataset.zip?download=1",
                                      fallbacks=["https://zenodo.org/records/574438/files/PicidaeDataset.zip"],
                                      filename="PicidaeDataset.zip")},
        citation="""@dataset{florentin2017picidae,
  title={Picidae sound dataset},
  author={Florentin, Juliette and Verlinde, Olivier and Dutoit, Thierry},
  year={2017},
  publisher={Zenodo},
  doi={10.5281/zenodo.574438}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Picidae: woodpecker calls, drums and songs of 7 species (and background noise), 13 classes.",
            features=Features({"series": series_feature(), "label": ClassLabel(names=LABELS),
                               "label_name": Value("string"), "xc_identifier": Value("string"),
                               "filename": Value("string")}),
            supervised_keys=("series", "label"),
        )

    def _generate_examples(self, data_path, split):
        with zipfile.ZipFile(data_path) as archive:
            for name in sorted(archive.namelist()):
                parts = name.split("/")
                if not name.lower().endswith(".wav") or "/._" in name or parts[-1].startswith("._"):
                    continue
                if len(parts) < 3 or parts[-2] not in _INDEX:
                    continue
                label, filename = parts[-2], parts[-1]
                yield name, {"series": read_series(archive.read(name), name=f"{data_path}:{name}"),
                             "label": _INDEX[label], "label_name": label, "xc_identifier": filename.split("-")[0],
                             "filename": filename}
