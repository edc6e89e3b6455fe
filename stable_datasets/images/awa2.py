"""AwA2, Animals with Attributes 2: 37,322 photos of 50 animal classes (attribute-based and zero-shot learning).

One zip, `Animals_with_Attributes2/JPEGImages/<class>/<file>.jpg`, not split: a single `train` split as upstream
has it (benchmarks hold out their own). Rows come class by class in the label order, each class's images in the
zip's stored order (upstream's order), the JPEG bytes as stored. No checksum of the archive is on public record,
so its checksum and size are left unset.
"""

from __future__ import annotations

import zipfile

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import folder_label
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

_ROOT = "Animals_with_Attributes2/JPEGImages/"

LABELS = [
    "antelope", "grizzly+bear", "killer+whale", "beaver", "dalmatian", "persian+cat", "horse", "german+shepherd",
    "blue+whale", "siamese+cat", "skunk", "mole", "tiger", "hippopotamus", "leopard", "moose", "spider+monkey",
    "humpback+whale", "elephant", "gorilla", "ox", "fox", "sheep", "seal", "chimpanzee", "hamster", "squirrel",
    "rhinoceros", "rabbit", "bat", "giraffe", "wolf", "chihuahua", "rat", "weasel", "otter", "buffalo", "zebra",
    "giant+panda", "deer", "bobcat", "pig", "lion", "mouse", "polar+bear", "collie", "walrus", "raccoon", "cow",
    "dolphin",
]


class AWA2(CatalogBuilder):
    """Animals with Attributes 2 (Xian et al., 2019); the images only (not the class attribute matrices)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://cvml.ista.ac.at/AwA2/",
        assets={"train": DownloadInfo("https://cvml.ista.ac.at/AwA2/AwA2-data.zip")},
        citation="""@ARTICLE{8413121,
  author={Xian, Yongqin and Lampert, Christoph H. and Schiele, Bernt and Akata, Zeynep},
  journal={IEEE Transactions on Pattern Analysis and Machine Intelligence},
  title={Zero-Shot Learning -- A Comprehensive Evaluation of the Good, the Bad and the Ugly},
  year={2019},
  volume={41},
  number={9},
  pages={2251-2265},
  doi={10.1109/TPAMI.2018.2857768}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Animals with Attributes 2 (AwA2): 37,322 images of 50 animal classes, used in "
                        "attribute-based classification and zero-shot learning. The JPEG bytes are kept as "
                        "published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 37_322},
        )

    def _generate_examples(self, data_path, split):
        if not zipfile.is_zipfile(data_path):
            raise StableDatasetsError(f"{data_path}: not a zip archive")
        classes = {name: index for index, name in enumerate(LABELS)}
        with zipfile.ZipFile(data_path) as archive:
            by_class: list[list[zipfile.ZipInfo]] = [[] for _ in LABELS]
            for info in archive.infolist():  # the central directory: no member is read yet
                if info.filename.startswith(_ROOT) and info.filename.endswith(".jpg"):
                    label = folder_label(info.filename, classes)
                    if label is not None:
                        by_class[label].append(info)
            for label, infos in enumerate(by_class):
                for info in infos:
                    yield info.filename, {"image": archive.read(info), "label": label}
