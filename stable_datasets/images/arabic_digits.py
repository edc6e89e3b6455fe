"""Arabic Handwritten Digits (AHDBase / MADBase): 70,000 28x28 grayscale digits written by 700 people, 60,000
train / 10,000 test, from the official CSV zip (one CSV of 784 pixels a row and one of labels per split).

The CSVs are read from the zip in place, a bounded block of lines at a time. Each row holds the pixels in MATLAB's
column-major order; it is reshaped as upstream does (Fortran order) so images come out upright."""

from __future__ import annotations

import io
import itertools
import zipfile

import numpy as np

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

#: no public record gives this file's sha256 or size: downloaded unchecked (row counts are checked)
_ARCHIVE = DownloadInfo("https://raw.githubusercontent.com/mloey/Arabic-Handwritten-Digits-Dataset/master/"
                        "Arabic%20Handwritten%20Digits%20Dataset%20CSV.zip")
#: split -> the start of its images and labels members' names ("csvTrainImages 60k x 784.csv", ...)
_MEMBERS = {"train": ("csvTrainImages", "csvTrainLabel"), "test": ("csvTestImages", "csvTestLabel")}
#: CSV lines parsed per step
_LINES_PER_BLOCK = 4096


class ArabicDigits(CatalogBuilder):
    """Arabic Handwritten Digits (El-Sawy, El-Bakry and Loey, 2016); images stay one channel (28, 28)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://github.com/mloey/Arabic-Handwritten-Digits-Dataset",
        assets={"archive": _ARCHIVE},
        citation="""@inproceedings{el2016cnn,
  title={CNN for handwritten arabic digits recognition based on LeNet-5},
  author={El-Sawy, Ahmed and Hazem, EL-Bakry and Loey, Mohamed},
  booktitle={International conference on advanced intelligent systems and informatics},
  pages={566--575},
  year={2016},
  organization={Springer}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Arabic Handwritten Digits: 70,000 28x28 grayscale images of the digits 0-9 written by 700 "
                        "participants (60,000 train, 10,000 test).",
            features=Features({"image": Image(mode="L"), "label": ClassLabel(names=[str(i) for i in range(10)])}),
            supervised_keys=("image", "label"),
            num_examples={"train": 60_000, "test": 10_000},
        )

    def _split_generators(self, dl_manager):
        path = dl_manager.download(self._source().remote_files()["archive"])
        return [SplitGenerator(split, {"data_path": path, "split": split}) for split in ("train", "test")]

    def _generate_examples(self, data_path, split):
        images_prefix, labels_prefix = _MEMBERS[split]
        with zipfile.ZipFile(data_path) as archive:
            images_name = _member(archive, data_path, images_prefix)
            labels_name = _member(archive, data_path, labels_prefix)
            with archive.open(images_name) as images_fh, archive.open(labels_name) as labels_fh:
                images_lines = io.TextIOWrapper(images_fh, encoding="ascii")
                labels_lines = io.TextIOWrapper(labels_fh, encoding="ascii")
                index = 0
                while True:
                    pixel_block = list(itertools.islice(images_lines, _LINES_PER_BLOCK))
                    label_block = list(itertools.islice(labels_lines, _LINES_PER_BLOCK))
                    if len(pixel_block) != len(label_block):
                        raise StableDatasetsError(f"{data_path}: {images_name} and {labels_name} hold different "
                                                  f"numbers of rows (they differ after row {index})")
                    if not pixel_block:
                        return
                    pixels = np.loadtxt(pixel_block, delimiter=",", dtype=np.uint8, ndmin=2)
                    if pixels.shape[1] != 784:
                        raise StableDatasetsError(f"{data_path}:{images_name}: rows of {pixels.shape[1]} values "
                                                  f"after row {index}, expected 784")
                    images = pixels.reshape(-1, 28, 28, order="F")
                    labels = np.loadtxt(label_block, dtype=np.int64, ndmin=1).tolist()
                    for image, label in zip(images, labels):
                        yield index, {"image": image, "label": label}
                        index += 1


def _member(archive: zipfile.ZipFile, path: str, prefix: str) -> str:
    names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1].startswith(prefix) and n.endswith(".csv")]
    if len(names) != 1:
        raise StableDatasetsError(f"{path}: expected one member named {prefix}*.csv, found {names}")
    return names[0]
