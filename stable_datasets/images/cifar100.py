"""CIFAR-100: 50,000 train / 10,000 test colour images, 32x32, 100 classes in 20 superclasses, from the binary
archive (upstream reads the pickled "python" archive; the binary one holds the same pixels and labels in the
same order, and nothing is unpickled)."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.records import iter_records, planes_to_hwc
from stable_datasets.features import ClassLabel, Features, Image

#: each record: coarse label, fine label, 3x32x32 planes
_RECORD = 2 + 3 * 32 * 32
_SPLIT_FILES = {"train": ["train.bin"], "test": ["test.bin"]}
_ARCHIVE = DownloadInfo("https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz",
                        checksum="sha256:58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec",
                        size=168513733)

FINE_LABELS = [
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle", "bowl", "boy",
    "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle", "chair", "chimpanzee", "clock",
    "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish",
    "forest", "fox", "girl", "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion",
    "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain", "mouse", "mushroom", "oak_tree", "orange",
    "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree", "plain", "plate", "poppy", "porcupine",
    "possum", "rabbit", "raccoon", "ray", "road", "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk",
    "skyscraper", "snail", "snake", "spider", "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank",
    "telephone", "television", "tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale",
    "willow_tree", "wolf", "woman", "worm",
]
COARSE_LABELS = [
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables", "household_electrical_devices",
    "household_furniture", "insects", "large_carnivores", "large_man-made_outdoor_things",
    "large_natural_outdoor_scenes", "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates",
    "people", "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2",
]


class CIFAR100(CatalogBuilder):
    """CIFAR-100 (Krizhevsky, 2009): `label` is the fine class, `superclass` the coarse one."""

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
            description="CIFAR-100: 60,000 32x32 colour images in 100 classes grouped into 20 superclasses; each "
                        "image has a fine label (its class) and a coarse label (its superclass).",
            features=Features({"image": Image(format="bmp"), "label": ClassLabel(names=FINE_LABELS),
                               "superclass": ClassLabel(names=COARSE_LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 50_000, "test": 10_000},
        )

    def _generate_examples(self, data_path, split):
        for name, fh in members_in_order(data_path, _SPLIT_FILES[split]):
            index = 0
            for block in iter_records(fh, _RECORD, f"{data_path}:{name}"):
                images = planes_to_hwc(block[:, 2:], 3, 32, 32)
                for coarse, fine, image in zip(block[:, 0].tolist(), block[:, 1].tolist(), images):
                    yield index, {"image": image, "label": fine, "superclass": coarse}
                    index += 1
