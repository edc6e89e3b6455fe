"""ImageNet-100: the first 100 wnids (sorted alphabetically) of ImageNet-1K, read from the same manual download;
labels 0-99 index those wnids. 5,000 validation images (50 a class); the train count depends on the classes'
sizes and is not checked (no public record states it)."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import DatasetSource
from stable_datasets.features import ClassLabel, Features, Image
from stable_datasets.images._imagenet_wnids import IN1K_CLASSES
from stable_datasets.images.imagenet1k import CITATION, FILES, ImageNet1K

IN100_CLASSES: list[str] = IN1K_CLASSES[:100]


class ImageNet100(ImageNet1K):
    """ImageNet-100: ImageNet-1K's rows whose class is one of the first 100 sorted wnids."""

    VERSION = Version("3.0.0")
    CLASSES = IN100_CLASSES
    SOURCE = DatasetSource(homepage="https://www.image-net.org/challenges/LSVRC/2012/", assets=FILES,
                           citation=CITATION, license="ImageNet terms of access (non-commercial research)")

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="ImageNet-100: the ImageNet-1K train and validation images of the first 100 wnids in "
                        "sorted order (labels 0-99); JPEG bytes kept as in the official tars.",
            features=Features({"image": Image(), "label": ClassLabel(names=self.CLASSES)}),
            supervised_keys=("image", "label"),
            num_examples={"validation": 5_000},
        )
