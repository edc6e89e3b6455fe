"""SVHN (Street View House Numbers), cropped digits: 73,257 train / 26,032 test / 531,131 extra colour images,
32x32, from the official `.mat` files (read whole by scipy: the format has no streaming reader; one file at a
time). Upstream re-encodes the pixels as JPEG; here they stay as in the file (lossless BMP cells: at 32x32 they
encode and decode fastest)."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.matlab import load_mat
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

_BASE = "http://ufldl.stanford.edu/housenumbers/"
#: split -> (file, sha256, size), as TFDS's and torchvision's records give them
_FILES = {
    "train": ("train_32x32.mat", "435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8", 182040794),
    "test": ("test_32x32.mat", "cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b", 64275384),
    "extra": ("extra_32x32.mat", "a133a4beb38a00fcdda90c9489e0c04f900b660ce8a316a5e854838379a71eb3", 1329278602),
}


class SVHN(CatalogBuilder):
    """SVHN cropped digits (Netzer et al., 2011); the label 10 of the files is the digit 0."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    EXTRA = "formats"
    SOURCE = DatasetSource(
        homepage="http://ufldl.stanford.edu/housenumbers/",
        assets={split: DownloadInfo(_BASE + name, checksum=f"sha256:{sha}", size=size)
                for split, (name, sha, size) in _FILES.items()},
        citation="""@inproceedings{netzer2011reading,
  title={Reading digits in natural images with unsupervised feature learning},
  author={Netzer, Yuval and Wang, Tao and Coates, Adam and Bissacco, Alessandro and Wu, Baolin and Ng, Andrew Y},
  booktitle={NIPS workshop on deep learning and unsupervised feature learning},
  year={2011}}""",
        license="non-commercial use",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="The Street View House Numbers (SVHN) dataset: 32x32 colour crops of digits from house "
                        "numbers in Google Street View images. Pixels are kept as in the official files (upstream "
                        "stores JPEG re-encodes).",
            features=Features({"image": Image(format="bmp"), "label": ClassLabel(names=[str(i) for i in range(10)])}),
            supervised_keys=("image", "label"),
            num_examples={"train": 73_257, "test": 26_032, "extra": 531_131},
        )

    def _generate_examples(self, data_path, split):
        mat = load_mat(data_path, ["X", "y"])
        if "X" not in mat or "y" not in mat:
            raise StableDatasetsError(f"{data_path} holds no 'X' and 'y' variables")
        images = mat["X"]  # (32, 32, 3, N)
        labels = np.asarray(mat["y"]).reshape(-1).astype(np.int64)
        if images.ndim != 4 or images.shape[:3] != (32, 32, 3) or images.shape[3] != len(labels):
            raise StableDatasetsError(f"{data_path}: X has shape {images.shape}, expected (32, 32, 3, {len(labels)})")
        labels[labels == 10] = 0
        for index, label in enumerate(labels.tolist()):
            yield index, {"image": np.ascontiguousarray(images[:, :, :, index]), "label": label}
