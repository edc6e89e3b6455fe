"""CIFAR-10: 50,000 train / 10,000 test colour images, 32x32, 10 classes, from the binary archive.

The binary archive is read, not the "python" one: that one is pickled, and a dataset library does not
unpickle files from the internet. Both hold the same pixels and labels in the same order.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.records import iter_records, planes_to_hwc
from stable_datasets.features import ClassLabel, Features, Image

NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
_RECORD = 1 + 3 * 32 * 32
_SPLIT_FILES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}
_ARCHIVE = DownloadInfo("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
                        checksum="sha256:c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
                        size=170052171)


class CIFAR10(CatalogBuilder):
    """CIFAR-10 (Krizhevsky, 2009)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
        assets={"train": _ARCHIVE, "test": _ARCHIVE},
        citation="""@article{krizhevsky2009learning,
  title={Learning multiple layers of features from tiny images},
  author={Krizhevsky, Alex and Hinton, Geoffrey and others},
  year={2009}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="CIFAR-10: 60,000 32x32 colour images in 10 classes, 6,000 per class.",
            features=Features({"image": Image(format="bmp"), "label": ClassLabel(names=NAMES)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 50_000, "test": 10_000},
        )

    def _generate_examples(self, data_path, split):
        for name, fh in members_in_order(data_path, _SPLIT_FILES[split]):
            index = 0
            for block in iter_records(fh, _RECORD, f"{data_path}:{name}"):
                for label, image in zip(block[:, 0].tolist(), planes_to_hwc(block[:, 1:], 3, 32, 32)):
                    yield f"{name}:{index}", {"image": image, "label": label}
                    index += 1
