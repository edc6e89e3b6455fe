"""EMNIST (Extended MNIST): handwritten digits and letters from NIST Special Database 19 in MNIST's 28x28 format, in
upstream's six configs (byclass, bymerge, balanced, letters, digits, mnist), from the official MATLAB archive.

Each config is one `.mat` member of `matlab.zip` (`matlab/emnist-<config>.mat`), read from the archive in place
(never extracted); a `.mat` file has no streaming reader, so scipy reads that one member whole, one split's arrays
at a time in memory. Pixels and labels are upstream's: each 784-pixel row reshaped to (28, 28) as stored, the
letters' labels 1-26 shifted to 0-25."""

from __future__ import annotations

import zipfile

import numpy as np

from stable_datasets.builder import BuilderConfig, DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.matlab import load_mat
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

#: config -> (classes, train rows, test rows), from the EMNIST paper (Cohen et al., 2017, table II) and upstream
CONFIGS = {
    "byclass": (62, 697_932, 116_323),
    "bymerge": (47, 697_932, 116_323),
    "balanced": (47, 112_800, 18_800),
    "letters": (26, 124_800, 20_800),
    "digits": (10, 240_000, 40_000),
    "mnist": (10, 60_000, 10_000),
}
#: no public record (TFDS, torchvision, upstream) gives this archive's sha256 or size: downloaded unchecked, the
#: row counts of each split are still checked after the build
_ARCHIVE = DownloadInfo("https://biometrics.nist.gov/cs_links/EMNIST/matlab.zip")


class EMNIST(CatalogBuilder):
    """EMNIST (Cohen et al., 2017); `config_name` picks the split scheme (default "byclass", upstream's first);
    images stay one channel (28, 28)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    EXTRA = "formats"
    BUILDER_CONFIGS = [BuilderConfig(name=name, version=Version("1.0.0"), description=f"EMNIST {name}: "
                                     f"{classes} classes") for name, (classes, _, _) in CONFIGS.items()]
    DEFAULT_CONFIG_NAME = "byclass"
    SOURCE = DatasetSource(
        homepage="https://www.nist.gov/itl/iad/image-group/emnist-dataset",
        assets={"archive": _ARCHIVE},
        citation="""@misc{cohen2017emnist,
  title={EMNIST: an extension of MNIST to handwritten letters},
  author={Gregory Cohen and Saeed Afshar and Jonathan Tapson and Andr{\\'e} van Schaik},
  year={2017},
  eprint={1702.05373},
  archivePrefix={arXiv},
  primaryClass={cs.CV}}""",
    )

    def _info(self) -> DatasetInfo:
        classes, train, test = CONFIGS[self.config.name]
        return DatasetInfo(
            description=f"EMNIST {self.config.name}: 28x28 grayscale handwritten characters from NIST Special "
                        f"Database 19, {classes} classes ({train:,} train, {test:,} test).",
            features=Features({"image": Image(mode="L"), "label": ClassLabel(num_classes=classes)}),
            supervised_keys=("image", "label"),
            num_examples={"train": train, "test": test},
        )

    def _split_generators(self, dl_manager):
        path = dl_manager.download(self._source().remote_files()["archive"])
        return [SplitGenerator(split, {"data_path": path, "split": split}) for split in ("train", "test")]

    def _generate_examples(self, data_path, split):
        images, labels = _read_split(data_path, self.config.name, split)
        if self.config.name == "letters":
            labels = labels - 1  # the file numbers the letters 1-26
        for index, label in enumerate(labels.tolist()):
            yield index, {"image": images[index], "label": label}


def _read_split(path: str, config: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 28, 28) uint8, labels (N,) int64) of one split of `matlab/emnist-<config>.mat` in the archive."""
    member = f"matlab/emnist-{config}.mat"
    with zipfile.ZipFile(path) as archive:
        if member not in archive.namelist():
            raise StableDatasetsError(f"{path} lacks the member {member}")
        with archive.open(member) as fh:  # a seekable member: scipy reads it in place
            mat = load_mat(fh, ["dataset"])
    try:
        part = mat["dataset"][0, 0][split][0, 0]
        images, labels = part["images"], part["labels"]
    except (KeyError, ValueError, IndexError):
        raise StableDatasetsError(f"{path}:{member} holds no dataset.{split}.images/labels struct") from None
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    if images.shape != (len(labels), 784):
        raise StableDatasetsError(f"{path}:{member}: {split} images have shape {images.shape}, expected "
                                  f"({len(labels)}, 784)")
    return np.asarray(images, dtype=np.uint8).reshape(-1, 28, 28), labels
