"""Oxford Flowers-102: 8,189 photos of 102 flower species; 1,020 train / 1,020 validation / 6,149 test.

The images come in one archive (`jpg/image_NNNNN.jpg`); `imagelabels.mat` gives each image's class (1-based) and
`setid.mat` the image ids of each split (`trnid`, `valid`, `tstid`). The `.mat` files are tiny and read whole by
scipy. Rows come in the archive's stored order, the JPEG bytes as stored.
"""

from __future__ import annotations

import os

import numpy as np

from stable_datasets.builder import DatasetInfo, Split, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import stream_members
from stable_datasets.catalog.formats.matlab import load_mat
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

_BASE = "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/"
#: asset -> (file, sha256, size): TFDS's record (url_checksums/oxford_flowers102.txt)
_FILES = {
    "images": ("102flowers.tgz", "2d01ecc807db462958cfe3d92f57a8c252b4abd240eb955770201e45f783b246", 344862509),
    "labels": ("imagelabels.mat", "4903e94206bac23bf772aadf06451916df56b58fc483a62db32a97b82656651d", 502),
    "setid": ("setid.mat", "46b8678f91fd95d3c8f4feab80d271a6c834a1dd896fe29fd3e6ad9ce5c8dccd", 14989),
}
#: split -> the variable of setid.mat listing its image ids
_SPLIT_IDS = {Split.TRAIN: "trnid", Split.VALIDATION: "valid", Split.TEST: "tstid"}

LABELS = [
    "pink primrose", "hard-leaved pocket orchid", "canterbury bells", "sweet pea", "english marigold", "tiger lily",
    "moon orchid", "bird of paradise", "monkshood", "globe thistle", "snapdragon", "colt's foot", "king protea",
    "spear thistle", "yellow iris", "globe-flower", "purple coneflower", "peruvian lily", "balloon flower",
    "giant white arum lily", "fire lily", "pincushion flower", "fritillary", "red ginger", "grape hyacinth",
    "corn poppy", "prince of wales feathers", "stemless gentian", "artichoke", "sweet william", "carnation",
    "garden phlox", "love in the mist", "mexican aster", "alpine sea holly", "ruby-lipped cattleya", "cape flower",
    "great masterwort", "siam tulip", "lenten rose", "barbeton daisy", "daffodil", "sword lily", "poinsettia",
    "bolero deep blue", "wallflower", "marigold", "buttercup", "oxeye daisy", "common dandelion", "petunia",
    "wild pansy", "primula", "sunflower", "pelargonium", "bishop of llandaff", "gaura", "geranium", "orange dahlia",
    "pink-yellow dahlia?", "cautleya spicata", "japanese anemone", "black-eyed susan", "silverbush",
    "californian poppy", "osteospermum", "spring crocus", "bearded iris", "windflower", "tree poppy", "gazania",
    "azalea", "water lily", "rose", "thorn apple", "morning glory", "passion flower", "lotus", "toad lily", "anthurium",
    "frangipani", "clematis", "hibiscus", "columbine", "desert-rose", "tree mallow", "magnolia", "cyclamen",
    "watercress", "canna lily", "hippeastrum", "bee balm", "ball moss", "foxglove", "bougainvillea", "camellia",
    "mallow", "mexican petunia", "bromelia", "blanket flower", "trumpet creeper", "blackberry lily",
]


class Flowers102(CatalogBuilder):
    """Oxford 102 Flower (Nilsback and Zisserman, 2008): flowers common in the United Kingdom, 40 to 258 images a
    class; labels 0-101 (the file's 1-102, minus one)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    EXTRA = "formats"
    SOURCE = DatasetSource(
        homepage="https://www.robots.ox.ac.uk/~vgg/data/flowers/102/",
        assets={key: DownloadInfo(_BASE + name, checksum=f"sha256:{sha}", size=size)
                for key, (name, sha, size) in _FILES.items()},
        citation=r"""@inproceedings{nilsback2008flowers102,
  title={Automated flower classification over a large number of classes},
  author={Nilsback, Maria-Elena and Zisserman, Andrew},
  booktitle={2008 Sixth Indian conference on computer vision, graphics \& image processing},
  pages={722--729},
  year={2008},
  organization={IEEE}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Oxford Flowers-102: 8,189 photos of 102 flower species commonly found in the United "
                        "Kingdom, split into 1,020 train, 1,020 validation and 6,149 test images. The JPEG bytes are "
                        "kept as published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 1_020, "validation": 1_020, "test": 6_149},
        )

    def _split_generators(self, dl_manager):
        paths = dl_manager.download(self._source().remote_files())
        return [SplitGenerator(split, {"paths": paths, "ids_variable": variable})
                for split, variable in _SPLIT_IDS.items()]

    def _generate_examples(self, paths, ids_variable):
        labels = _mat_vector(paths["labels"], "labels")
        ids = set(_mat_vector(paths["setid"], ids_variable).tolist())
        for name, data in stream_members(paths["images"], lambda member: _image_id(member) in ids):
            image_id = _image_id(name)
            if image_id > len(labels):
                raise StableDatasetsError(f"{paths['labels']}: no label for image {image_id} ({len(labels)} labels)")
            yield image_id, {"image": data, "label": int(labels[image_id - 1]) - 1}


def _mat_vector(path: str, variable: str) -> np.ndarray:
    mat = load_mat(path, [variable])
    if variable not in mat:
        raise StableDatasetsError(f"{path} holds no variable {variable!r}")
    return np.asarray(mat[variable]).reshape(-1).astype(np.int64)


def _image_id(member: str) -> int:
    """12 for ".../image_00012.jpg"; 0 (no image) for any other member."""
    stem, ext = os.path.splitext(member.rsplit("/", 1)[-1])
    prefix, _, number = stem.partition("_")
    return int(number) if ext == ".jpg" and prefix == "image" and number.isdigit() else 0
