"""DTD, the Describable Textures Dataset: 5,640 texture photos in 47 classes, 120 a class.

The archive holds ten official partitions of the images into equal train / validation / test thirds (40 images a
class each), listed in `dtd/labels/{train,val,test}<k>.txt` as "<class>/<file>" lines. Each partition is a config
(`partition_1` ... `partition_10`); the default, `partition_1`, is the one upstream and TFDS read. Rows come in
the list's order, the JPEG bytes as stored.
"""

from __future__ import annotations

from stable_datasets.builder import BuilderConfig, DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.image_archives import lines_of
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

#: TFDS's record of the official archive (url_checksums/dtd.txt)
_ARCHIVE = DownloadInfo("https://www.robots.ox.ac.uk/~vgg/data/dtd/download/dtd-r1.0.1.tar.gz",
                        checksum="sha256:e42855a52a4950a3b59612834602aa253914755c95b0cff9ead6d07395f8e205",
                        size=625239812)
PARTITIONS = 10

LABELS = [
    "banded", "blotchy", "braided", "bubbly", "bumpy", "chequered", "cobwebbed", "cracked", "crosshatched",
    "crystalline", "dotted", "fibrous", "flecked", "freckled", "frilly", "gauzy", "grid", "grooved", "honeycombed",
    "interlaced", "knitted", "lacelike", "lined", "marbled", "matted", "meshed", "paisley", "perforated", "pitted",
    "pleated", "polka-dotted", "porous", "potholed", "scaly", "smeared", "spiralled", "sprinkled", "stained",
    "stratified", "striped", "studded", "swirly", "veined", "waffled", "woven", "wrinkled", "zigzagged",
]


class DTD(CatalogBuilder):
    """Describable Textures Dataset (Cimpoi et al., 2014); `label` is each image's key attribute (its folder)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    BUILDER_CONFIGS = [BuilderConfig(name=f"partition_{k}", description=f"the official partition {k} of 10")
                       for k in range(1, PARTITIONS + 1)]
    DEFAULT_CONFIG_NAME = "partition_1"
    SOURCE = DatasetSource(
        homepage="https://www.robots.ox.ac.uk/~vgg/data/dtd/",
        assets={"train": _ARCHIVE, "val": _ARCHIVE, "test": _ARCHIVE},
        citation="""@InProceedings{cimpoi14describing,
  Author={M. Cimpoi and S. Maji and I. Kokkinos and S. Mohamed and A. Vedaldi},
  Title={Describing Textures in the Wild},
  Booktitle={Proceedings of the {IEEE} Conf. on Computer Vision and Pattern Recognition ({CVPR})},
  Year={2014}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Describing Textures in the Wild (DTD): 5,640 texture images in 47 categories, split into "
                        f"equal train, validation and test thirds ({self.config.name} of the 10 official "
                        "partitions). The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 1_880, "validation": 1_880, "test": 1_880},
        )

    def _generate_examples(self, data_path, split):
        partition = self.config.name.removeprefix("partition_")
        list_name = f"dtd/labels/{split}{partition}.txt"
        files = [line for _, fh in members_in_order(data_path, [list_name]) for line in lines_of(fh.read())]
        classes = {name: index for index, name in enumerate(LABELS)}
        for index, (name, image) in enumerate(members_in_order(data_path, [f"dtd/images/{f}" for f in files])):
            folder = name.removeprefix("dtd/images/").split("/")[0]
            if folder not in classes:
                raise StableDatasetsError(f"{data_path}:{list_name} names {name!r}, in no known class folder")
            yield index, {"image": image.read(), "label": classes[folder]}
