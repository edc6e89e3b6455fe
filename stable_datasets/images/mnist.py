"""MNIST: handwritten digits, 60,000 train / 10,000 test, 28x28 grayscale, from the IDX files."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features, Image
from stable_datasets.images._idx_pairs import idx_examples, idx_split_generators

_BASE = "https://storage.googleapis.com/cvdf-datasets/mnist/"
_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"
#: name -> (file, sha256, size): torchvision's and TFDS's records of the official files
_FILES = {
    "train_images": ("train-images-idx3-ubyte.gz", "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                     9912422),
    "train_labels": ("train-labels-idx1-ubyte.gz", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                     28881),
    "test_images": ("t10k-images-idx3-ubyte.gz", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                    1648877),
    "test_labels": ("t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                    4542),
}


class MNIST(CatalogBuilder):
    """The MNIST database of handwritten digits; images stay one channel (28, 28)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="http://yann.lecun.com/exdb/mnist/",
        assets={key: DownloadInfo(_BASE + name, [_MIRROR + name], f"sha256:{sha}", size=size)
                for key, (name, sha, size) in _FILES.items()},
        citation="""@misc{lecun1998mnist,
  author={Yann LeCun and Corinna Cortes and Christopher J.C. Burges},
  title={The MNIST database of handwritten digits},
  year={1998},
  url={http://yann.lecun.com/exdb/mnist/}}""",
        license="CC BY-SA 3.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="The MNIST database of handwritten digits: 60,000 training and 10,000 test images, 28x28 "
                        "grayscale, 10 classes.",
            features=Features({"image": Image(mode="L"), "label": ClassLabel(names=[str(d) for d in range(10)])}),
            supervised_keys=("image", "label"),
            num_examples={"train": 60_000, "test": 10_000},
        )

    def _split_generators(self, dl_manager):
        return idx_split_generators(dl_manager, self._source().remote_files())

    def _generate_examples(self, images, labels):
        yield from idx_examples(images, labels)
