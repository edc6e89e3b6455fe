"""CIFAR-100-C: the 10,000 CIFAR-100 test images under 19 corruptions at 5 severities (950,000 rows in upstream's
"all" config), read from the official uncompressed tar of `.npy` arrays in place (no extraction, no unpickling);
pixels stored losslessly (PNG). `label` is the fine class, as upstream's."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features, Image, Value
from stable_datasets.images._cifar_corrupted import (
    CORRUPTIONS,
    IMAGES_PER_LEVEL,
    CorruptionConfig,
    corrupted_rows,
    corruption_configs,
)
from stable_datasets.images.cifar10_c import _CITATION
from stable_datasets.images.cifar100 import FINE_LABELS

#: sha256 and size from TFDS's url_checksums/cifar100_corrupted.txt (its URL is the fallback here)
_ARCHIVE = DownloadInfo("https://zenodo.org/records/3555552/files/CIFAR-100-C.tar?download=1",
                        fallbacks=["https://zenodo.org/record/3555552/files/CIFAR-100-C.tar"],
                        checksum="sha256:30ee6543a1bfd049fa33834b7c1ada301e7064b7fbe8fc38340eb8b62ced4b33",
                        filename="CIFAR-100-C.tar", size=2918473216)


class CIFAR100C(CatalogBuilder):
    """CIFAR-100-C (Hendrycks & Dietterich, 2019): one `test` split; configs "all" (default), "<corruption>",
    "<corruption>_<severity>"."""

    VERSION = Version("1.0.0")
    TASK = "image classification (robustness)"
    BUILDER_CONFIG_CLASS = CorruptionConfig
    BUILDER_CONFIGS = corruption_configs(CORRUPTIONS)
    DEFAULT_CONFIG_NAME = "all"
    SOURCE = DatasetSource(homepage="https://zenodo.org/records/3555552", assets={"test": _ARCHIVE},
                           citation=_CITATION, license="CC BY 4.0")

    @staticmethod
    def _corruptions() -> list[str]:
        """Upstream's list of corruption names, in its order."""
        return list(CORRUPTIONS)

    @staticmethod
    def _fine_labels() -> list[str]:
        return list(FINE_LABELS)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="CIFAR-100-C: the CIFAR-100 test set under 19 common corruptions (noise, blur, weather, "
                        "digital) at 5 severities each; `corruption_name` and `corruption_level` say which.",
            features=Features({"image": Image(), "label": ClassLabel(names=FINE_LABELS),
                               "corruption_name": Value("string"), "corruption_level": Value("int32")}),
            supervised_keys=("image", "label"),
            num_examples={"test": self.config.num_rows(CORRUPTIONS, IMAGES_PER_LEVEL)},
        )

    def _generate_examples(self, data_path, split):
        yield from corrupted_rows(data_path, self.config)
