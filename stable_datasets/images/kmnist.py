"""Kuzushiji-MNIST: 70,000 28x28 grayscale images of 10 cursive Japanese (Kuzushiji) characters, 60,000 train /
10,000 test. The authors publish the same arrays as `.npz` (upstream's files) and as IDX; the IDX files are read
here: TFDS records their sha256 and size (no public record exists for the `.npz` ones), and they need no unzip."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features, Image
from stable_datasets.images._idx_pairs import idx_examples, idx_split_generators

_BASE = "https://codh.rois.ac.jp/kmnist/dataset/kmnist/"
#: asset -> (file, sha256, size), from TFDS's url_checksums/kmnist.txt
_FILES = {
    "train_images": ("train-images-idx3-ubyte.gz", "51467d22d8cc72929e2a028a0428f2086b092bb31cfb79c69cc0a90ce135fde4",
                     18165135),
    "train_labels": ("train-labels-idx1-ubyte.gz", "e38f9ebcd0f3ebcdec7fc8eabdcdaef93bb0df8ea12bee65224341c8183d8e17",
                     29497),
    "test_images": ("t10k-images-idx3-ubyte.gz", "edd7a857845ad6bb1d0ba43fe7e794d164fe2dce499a1694695a792adfac43c5",
                    3041136),
    "test_labels": ("t10k-labels-idx1-ubyte.gz", "20bb9a0ef54c7db3efc55a92eef5582c109615df22683c380526788f98e42a1c",
                    5120),
}
#: upstream's class names, in its order (the romanised characters of classmap.csv)
LABELS = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]


class KMNIST(CatalogBuilder):
    """Kuzushiji-MNIST (Clanuwat et al., 2018); images stay one channel (28, 28)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="http://codh.rois.ac.jp/kmnist/",
        assets={key: DownloadInfo(_BASE + name, checksum=f"sha256:{sha}", size=size)
                for key, (name, sha, size) in _FILES.items()},
        citation="""@online{clanuwat2018deep,
  author={Tarin Clanuwat and Mikel Bober-Irizar and Asanobu Kitamoto and Alex Lamb and Kazuaki Yamamoto and David Ha},
  title={Deep Learning for Classical Japanese Literature},
  date={2018-12-03},
  year={2018},
  eprintclass={cs.CV},
  eprinttype={arXiv},
  eprint={cs.CV/1812.01718}}""",
        license="CC BY-SA 4.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Kuzushiji-MNIST: 60,000 training and 10,000 test 28x28 grayscale images of 10 classes of "
                        "cursive Japanese characters.",
            features=Features({"image": Image(mode="L"), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 60_000, "test": 10_000},
        )

    def _split_generators(self, dl_manager):
        return idx_split_generators(dl_manager, self._source().remote_files())

    def _generate_examples(self, images, labels):
        yield from idx_examples(images, labels)
