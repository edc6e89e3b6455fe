"""Arabic Handwritten Characters (AHCD): 16,800 32x32 grayscale characters (alef to yeh, 28 classes) written by 60
people, 13,440 train / 3,360 test, from the two official zips of PNGs. Each PNG is kept byte for byte (no decode
and re-encode); its class is the number after `label_` in its name, counted from 1 in the files."""

from __future__ import annotations

import re
import zipfile

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

_BASE = "https://github.com/mloey/Arabic-Handwritten-Characters-Dataset/raw/master/"
#: no public record gives these files' sha256 or size: downloaded unchecked (row counts are checked)
_FILES = {"train": "Train%20Images%2013440x32x32.zip", "test": "Test%20Images%203360x32x32.zip"}
#: the class number at the end of a member's name: ".../id_12_label_3.png"
_LABEL = re.compile(r"_(\d+)\.png$")


class ArabicCharacters(CatalogBuilder):
    """AHCD (El-Sawy, Loey and El-Bakry, 2017); rows follow each zip's member order, as upstream's."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://github.com/mloey/Arabic-Handwritten-Characters-Dataset",
        assets={split: DownloadInfo(_BASE + name) for split, name in _FILES.items()},
        citation="""@article{el2017arabic,
  title={Arabic handwritten characters recognition using convolutional neural network},
  author={El-Sawy, Ahmed and Loey, Mohamed and El-Bakry, Hazem},
  journal={WSEAS Transactions on Computer Research},
  volume={5},
  pages={11--19},
  year={2017}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Arabic Handwritten Characters Dataset: 16,800 32x32 grayscale images of the 28 Arabic "
                        "letters written by 60 participants; writers of the train and test sets are distinct.",
            features=Features({"image": Image(mode="L"), "label": ClassLabel(names=[str(i) for i in range(28)])}),
            supervised_keys=("image", "label"),
            num_examples={"train": 13_440, "test": 3_360},
        )

    def _generate_examples(self, data_path, split):
        yield from png_zip_examples(data_path)


def png_zip_examples(path: str):
    """(member name, {"image": PNG bytes, "label": class from the name - 1}) for each PNG of the zip, in order."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.is_dir() or not info.filename.endswith(".png"):
                continue
            match = _LABEL.search(info.filename)
            if match is None:
                raise StableDatasetsError(f"{path}: member {info.filename!r} names no class (expected '..._<n>.png')")
            yield info.filename, {"image": archive.read(info), "label": int(match.group(1)) - 1}
