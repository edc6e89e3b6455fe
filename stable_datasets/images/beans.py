"""Beans (iBean): photos of bean leaves from Ugandan fields, healthy or with one of two diseases; 1,034 train /
133 validation / 128 test.

One zip a split, `<split>/<class>/<file>.jpg`. Rows come in the zip's stored order, the JPEG bytes as stored.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import folder_label, stream_members
from stable_datasets.features import ClassLabel, Features, Image

_BASE = "https://storage.googleapis.com/ibeans/"
#: split -> (sha256, size): TFDS's record (url_checksums/beans.txt)
_FILES = {
    "train": ("284fe8456ce20687f4367ae7ad94a64577e7f9fde2c2c6b1c74340ab5dc82715", 143812152),
    "validation": ("90b7aa1c26d91d9afff07a30bbc67a5ea34f1f1397f068d8675be09d7d0c602d", 18504213),
    "test": ("ca67b15d960d1e2fd9d23fd8498ce86818ead90755c630a43baf19ec4af09312", 17708541),
}
LABELS = ["healthy", "angular_leaf_spot", "bean_rust"]


class Beans(CatalogBuilder):
    """iBean (Makerere AI Lab, 2020): leaf images for bean disease classification."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://github.com/AI-Lab-Makerere/ibean/",
        assets={split: DownloadInfo(f"{_BASE}{split}.zip", checksum=f"sha256:{sha}", size=size)
                for split, (sha, size) in _FILES.items()},
        citation="""@misc{makerere2020beans,
  author="{Makerere AI Lab}",
  title="{Bean Disease Dataset}",
  year="2020",
  month="January",
  url="https://github.com/AI-Lab-Makerere/ibean/"}""",
        license="MIT License",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="The iBean dataset: leaf images in three classes, healthy, angular leaf spot and bean rust, "
                        "taken in Uganda for disease classification in the field. The JPEG bytes are kept as "
                        "published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 1_034, "validation": 133, "test": 128},
        )

    def _generate_examples(self, data_path, split):
        classes = {name: index for index, name in enumerate(LABELS)}
        for name, data in stream_members(data_path, lambda member: member.endswith(".jpg")):
            yield name, {"image": data, "label": folder_label(name, classes, where=data_path)}
