"""notMNIST: glyphs of the letters A-J taken from public fonts, 28x28 grayscale, 60,000 train / 10,000 test, in the
MNIST IDX layout of the notMNIST-to-MNIST conversion upstream downloads."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features, Image
from stable_datasets.images._idx_pairs import idx_examples, idx_split_generators

_BASE = "https://github.com/davidflanagan/notMNIST-to-MNIST/raw/refs/heads/master/"
#: asset -> file. No public record of these files' sha256 or size exists (upstream, TFDS and torchvision give
#: none), so they are downloaded unchecked; the row counts are still checked after the build.
_FILES = {"train_images": "train-images-idx3-ubyte.gz", "train_labels": "train-labels-idx1-ubyte.gz",
          "test_images": "t10k-images-idx3-ubyte.gz", "test_labels": "t10k-labels-idx1-ubyte.gz"}


class NotMNIST(CatalogBuilder):
    """notMNIST (Bulatov, 2011): 10 classes, the letters A to J; images stay one channel (28, 28)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://yaroslavvb.blogspot.com/2011/09/notmnist-dataset.html",
        assets={key: DownloadInfo(_BASE + name) for key, name in _FILES.items()},
        citation="""@misc{bulatov2011notmnist,
  author={Yaroslav Bulatov},
  title={notMNIST dataset},
  year={2011},
  url={http://yaroslavvb.blogspot.com/2011/09/notmnist-dataset.html}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="notMNIST: glyphs of the letters A-J extracted from publicly available fonts, made to look "
                        "like MNIST: 28x28 grayscale, 10 classes.",
            features=Features({"image": Image(mode="L"), "label": ClassLabel(names=list("ABCDEFGHIJ"))}),
            supervised_keys=("image", "label"),
            num_examples={"train": 60_000, "test": 10_000},
        )

    def _split_generators(self, dl_manager):
        return idx_split_generators(dl_manager, self._source().remote_files())

    def _generate_examples(self, images, labels):
        yield from idx_examples(images, labels)
