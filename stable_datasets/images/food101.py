"""Food-101: 101 dishes, 75,750 train / 25,250 test photos (at most 512 pixels a side), from the official archive.

The archive lists each split's images in `food-101/meta/{train,test}.txt` ("<class>/<id>" lines); the class is the
image's folder. Rows come in the archive's stored order, the JPEG bytes as stored. Upstream reads a repackaging
(one tar a split, on Hugging Face) of the same images; the official archive is read here because its checksum is
on public record (TFDS's) and it needs no third-party copy.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import folder_label, lines_of, read_member, stream_members
from stable_datasets.features import ClassLabel, Features, Image

#: TFDS's record of the official archive (url_checksums/food101.txt)
_ARCHIVE = DownloadInfo("http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz",
                        checksum="sha256:d97d15e438b7f4498f96086a4f7e2fa42a32f2712e87d3295441b2b6314053a4",
                        size=4996278331)
_ROOT = "food-101/"

LABELS = [
    "apple_pie", "baby_back_ribs", "baklava", "beef_carpaccio", "beef_tartare", "beet_salad", "beignets", "bibimbap",
    "bread_pudding", "breakfast_burrito", "bruschetta", "caesar_salad", "cannoli", "caprese_salad", "carrot_cake",
    "ceviche", "cheesecake", "cheese_plate", "chicken_curry", "chicken_quesadilla", "chicken_wings", "chocolate_cake",
    "chocolate_mousse", "churros", "clam_chowder", "club_sandwich", "crab_cakes", "creme_brulee", "croque_madame",
    "cup_cakes", "deviled_eggs", "donuts", "dumplings", "edamame", "eggs_benedict", "escargots", "falafel",
    "filet_mignon", "fish_and_chips", "foie_gras", "french_fries", "french_onion_soup", "french_toast",
    "fried_calamari", "fried_rice", "frozen_yogurt", "garlic_bread", "gnocchi", "greek_salad",
    "grilled_cheese_sandwich", "grilled_salmon", "guacamole", "gyoza", "hamburger", "hot_and_sour_soup", "hot_dog",
    "huevos_rancheros", "hummus", "ice_cream", "lasagna", "lobster_bisque", "lobster_roll_sandwich",
    "macaroni_and_cheese", "macarons", "miso_soup", "mussels", "nachos", "omelette", "onion_rings", "oysters",
    "pad_thai", "paella", "pancakes", "panna_cotta", "peking_duck", "pho", "pizza", "pork_chop", "poutine", "prime_rib",
    "pulled_pork_sandwich", "ramen", "ravioli", "red_velvet_cake", "risotto", "samosa", "sashimi", "scallops",
    "seaweed_salad", "shrimp_and_grits", "spaghetti_bolognese", "spaghetti_carbonara", "spring_rolls", "steak",
    "strawberry_shortcake", "sushi", "tacos", "takoyaki", "tiramisu", "tuna_tartare", "waffles"
]


class Food101(CatalogBuilder):
    """Food-101 (Bossard et al., 2014): 750 training and 250 test images per class; the training images were
    deliberately not cleaned (some noise in colours and labels)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://data.vision.ee.ethz.ch/cvl/datasets_extra/food-101/",
        assets={"train": _ARCHIVE, "test": _ARCHIVE},
        citation="""@inproceedings{bossard14,
  title={Food-101 -- Mining Discriminative Components with Random Forests},
  author={Bossard, Lukas and Guillaumin, Matthieu and Van Gool, Luc},
  booktitle={European Conference on Computer Vision},
  year={2014}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Food-101: 101,000 photos of 101 dishes, 750 training and 250 manually reviewed test images "
                        "per class, rescaled to at most 512 pixels a side. The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 75_750, "test": 25_250},
        )

    def _generate_examples(self, data_path, split):
        wanted = {f"{_ROOT}images/{line}.jpg" for line in lines_of(read_member(data_path, f"{_ROOT}meta/{split}.txt"))}
        classes = {name: index for index, name in enumerate(LABELS)}
        for name, data in stream_members(data_path, wanted.__contains__):
            yield name, {"image": data, "label": folder_label(name, classes, where=data_path)}
