"""Fashion-MNIST: Zalando's article images, 60,000 train / 10,000 test, 28x28 grayscale, 10 classes, from the
IDX files (one of images and one of labels per split, as MNIST)."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features, Image
from stable_datasets.images._idx_pairs import idx_examples, idx_split_generators

_BASE = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
#: asset -> (file, sha256, size), from TFDS's url_checksums/fashion_mnist.txt
_FILES = {
    "train_images": ("train-images-idx3-ubyte.gz", "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                     26421880),
    "train_labels": ("train-labels-idx1-ubyte.gz", "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                     29515),
    "test_images": ("t10k-images-idx3-ubyte.gz", "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                    4422102),
    "test_labels": ("t10k-labels-idx1-ubyte.gz", "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
                    5148),
}
LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


class FashionMNIST(CatalogBuilder):
    """Fashion-MNIST (Xiao et al., 2017), a drop-in replacement for MNIST; images stay one channel (28, 28)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://github.com/zalandoresearch/fashion-mnist",
        assets={key: DownloadInfo(_BASE + name, checksum=f"sha256:{sha}", size=size)
                for key, (name, sha, size) in _FILES.items()},
        citation="""@article{xiao2017fashion,
  title={Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms},
  author={Xiao, Han and Rasul, Kashif and Vollgraf, Roland},
  journal={arXiv preprint arXiv:1708.07747},
  year={2017}}""",
        license="MIT",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Fashion-MNIST: 70,000 28x28 grayscale images of Zalando's articles in 10 classes "
                        "(60,000 train, 10,000 test).",
            features=Features({"image": Image(mode="L"), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 60_000, "test": 10_000},
        )

    def _split_generators(self, dl_manager):
        return idx_split_generators(dl_manager, self._source().remote_files())

    def _generate_examples(self, images, labels):
        yield from idx_examples(images, labels)
