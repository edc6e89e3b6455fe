"""CIFAR-10-C: the 10,000 CIFAR-10 test images under 19 corruptions at 5 severities (950,000 rows in upstream's
"all" config), read from the official uncompressed tar of `.npy` arrays in place (no extraction, no unpickling);
pixels stored losslessly (PNG)."""

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
from stable_datasets.images.cifar10 import NAMES

#: sha256 and size from TFDS's url_checksums/cifar10_corrupted.txt (its URL is the fallback here)
_ARCHIVE = DownloadInfo("https://zenodo.org/records/2535967/files/CIFAR-10-C.tar?download=1",
                        fallbacks=["https://zenodo.org/record/2535967/files/CIFAR-10-C.tar"],
                        checksum="sha256:c72763e101c723b7c507b96205f7e938912a5d587376173b825850cf3cb876a7",
                        filename="CIFAR-10-C.tar", size=2918471680)
_CITATION = """@article{hendrycks2019robustness,
  title={Benchmarking Neural Network Robustness to Common Corruptions and Perturbations},
  author={Dan Hendrycks and Thomas Dietterich},
  journal={Proceedings of the International Conference on Learning Representations},
  year={2019}}"""


class CIFAR10C(CatalogBuilder):
    """CIFAR-10-C (Hendrycks & Dietterich, 2019): one `test` split; configs "all" (default), "<corruption>",
    "<corruption>_<severity>"."""

    VERSION = Version("1.0.0")
    TASK = "image classification (robustness)"
    BUILDER_CONFIG_CLASS = CorruptionConfig
    BUILDER_CONFIGS = corruption_configs(CORRUPTIONS)
    DEFAULT_CONFIG_NAME = "all"
    SOURCE = DatasetSource(homepage="https://zenodo.org/records/2535967", assets={"test": _ARCHIVE},
                           citation=_CITATION, license="CC BY 4.0")

    @staticmethod
    def _corruptions() -> list[str]:
        """Upstream's list of corruption names, in its order."""
        return list(CORRUPTIONS)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="CIFAR-10-C: the CIFAR-10 test set under 19 common corruptions (noise, blur, weather, "
                        "digital) at 5 severities each; `corruption_name` and `corruption_level` say which.",
            features=Features({"image": Image(), "label": ClassLabel(names=NAMES),
                               "corruption_name": Value("string"), "corruption_level": Value("int32")}),
            supervised_keys=("image", "label"),
            num_examples={"test": self.config.num_rows(CORRUPTIONS, IMAGES_PER_LEVEL)},
        )

    def _generate_examples(self, data_path, split):
        yield from corrupted_rows(data_path, self.config)
