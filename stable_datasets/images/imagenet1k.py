"""ImageNet-1K (ILSVRC2012): 1,281,167 train / 50,000 validation JPEGs in 1,000 classes, from the official tars
(behind a login: a manual download). The train tar holds one tar per class; both levels are read as streams,
member by member, never extracted; the validation labels come from the devkit (its ground-truth list and the
ILSVRC2012_ID -> wnid table of meta.mat). Labels index the wnids sorted alphabetically; JPEG bytes are kept."""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
from typing import ClassVar

from stable_datasets.builder import DatasetInfo, Split, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import ManualDownloadError, StableDatasetsError, missing_extra
from stable_datasets.features import ClassLabel, Features, Image
from stable_datasets.images._imagenet_wnids import IN1K_CLASSES

_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
_BASE = "https://image-net.org/data/ILSVRC/2012/"
#: file names of the manual download; sizes and sha256 of the two image tars from TFDS's
#: url_checksums/imagenet2012.txt (no public sha256 record exists for the devkit)
FILES = {
    "train": DownloadInfo(_BASE + "ILSVRC2012_img_train.tar", size=147897477120,
                          checksum="sha256:b08200a27a8e34218a0e58fde36b0fe8f73bc377f4acea2d91602057c3ca45bb"),
    "val": DownloadInfo(_BASE + "ILSVRC2012_img_val.tar", size=6744924160,
                        checksum="sha256:c7e06a6c0baccf06d8dbeb6577d71efff84673a5dbdd50633ab44f8ea0456ae0"),
    "devkit": DownloadInfo(_BASE + "ILSVRC2012_devkit_t12.tar.gz"),
}
MANUAL = ("Download ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar and ILSVRC2012_devkit_t12.tar.gz from "
          "https://image-net.org/download-images (sign in and accept the terms of access) into one folder, "
          "unextracted.")
CITATION = """@inproceedings{deng2009imagenet,
  title={ImageNet: A large-scale hierarchical image database},
  author={Deng, Jia and Dong, Wei and Socher, Richard and Li, Li-Jia and Li, Kai and Fei-Fei, Li},
  booktitle={CVPR},
  year={2009}}"""


class ImageNet1K(CatalogBuilder):
    """ImageNet-1K (ILSVRC2012): `train` and `validation`; a subclass keeps a subset of `CLASSES`."""

    VERSION = Version("3.0.0")
    TASK = "image classification"
    EXTRA = "formats"
    MANUAL_DOWNLOAD = MANUAL
    #: the wnids kept, in label order
    CLASSES: ClassVar[list[str]] = IN1K_CLASSES
    SOURCE = DatasetSource(homepage="https://www.image-net.org/challenges/LSVRC/2012/", assets=FILES,
                           citation=CITATION, license="ImageNet terms of access (non-commercial research)")

    @classmethod
    def _class_names(cls) -> list[str]:
        return list(cls.CLASSES)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="ImageNet-1K (ILSVRC2012) classification: train and validation images of 1,000 WordNet "
                        "classes, labels in sorted-wnid order; JPEG bytes kept as in the official tars.",
            features=Features({"image": Image(), "label": ClassLabel(names=self.CLASSES)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 1_281_167, "validation": 50_000},
        )

    def _split_generators(self, dl_manager):
        folder = self.manual_folder()
        paths = {}
        for name, info in FILES.items():
            path = os.path.join(folder, posixpath.basename(info.url))
            if not os.path.isfile(path):
                raise ManualDownloadError(f"{self.builder_name()}: {path} is missing. {self.MANUAL_DOWNLOAD}")
            paths[name] = path
        return [SplitGenerator(Split.TRAIN, {"split": "train", "data_path": paths["train"]}),
                SplitGenerator(Split.VALIDATION, {"split": "val", "data_path": paths["val"],
                                                  "devkit": paths["devkit"]})]

    def _generate_examples(self, split, data_path, devkit=None):
        labels = {wnid: index for index, wnid in enumerate(self.CLASSES)}
        if split == "train":
            yield from _train_rows(data_path, labels)
        else:
            yield from _validation_rows(data_path, devkit, labels)


def _train_rows(path: str, labels: dict[str, int]):
    """Class tars in the outer tar's order, images in each class tar's order; classes not kept are skipped."""
    with tarfile.open(path, "r|*") as outer:
        for member in outer:
            wnid = posixpath.basename(member.name).removesuffix(".tar")
            if not member.isfile() or not member.name.endswith(".tar") or wnid not in labels:
                continue
            with tarfile.open(fileobj=outer.extractfile(member), mode="r|*") as inner:
                for image in inner:
                    if image.isfile() and image.name.lower().endswith(_IMAGE_SUFFIXES):
                        yield f"{wnid}/{image.name}", {"image": inner.extractfile(image).read(),
                                                       "label": labels[wnid]}


def _validation_rows(path: str, devkit: str, labels: dict[str, int]):
    """Images in the tar's order; ILSVRC2012_val_<n>.JPEG has the n-th line of the ground truth as its class."""
    id_to_wnid, truth = _devkit(devkit)
    with tarfile.open(path, "r|*") as archive:
        for member in archive:
            if not member.isfile() or not member.name.lower().endswith(_IMAGE_SUFFIXES):
                continue
            stem = posixpath.splitext(posixpath.basename(member.name))[0]
            try:
                number = int(stem.rsplit("_", 1)[-1])
            except ValueError:
                continue
            if not 1 <= number <= len(truth):
                raise StableDatasetsError(f"{path}: {member.name} has no line in the devkit's ground truth "
                                          f"({len(truth)} lines)")
            label = labels.get(id_to_wnid.get(truth[number - 1], ""))
            if label is not None:
                yield f"val/{member.name}", {"image": archive.extractfile(member).read(), "label": label}


def _devkit(path: str) -> tuple[dict[int, str], list[int]]:
    """ILSVRC2012_ID -> wnid (data/meta.mat) and the validation ground truth (one ILSVRC2012_ID a line)."""
    wanted = {"data/meta.mat": b"", "data/ILSVRC2012_validation_ground_truth.txt": b""}
    found = set()
    with tarfile.open(path, "r:*") as archive:
        for member in archive:
            for suffix in wanted:
                if member.isfile() and member.name.endswith(suffix):
                    wanted[suffix] = archive.extractfile(member).read()
                    found.add(suffix)
    missing = sorted(set(wanted) - found)
    if missing:
        raise StableDatasetsError(f"{path} lacks the member(s) {missing}")
    try:
        import scipy.io
    except ImportError:
        raise missing_extra(f"reading {path} (the ImageNet devkit's meta.mat)", "scipy", "formats") from None
    synsets = scipy.io.loadmat(io.BytesIO(wanted["data/meta.mat"]), squeeze_me=True,
                               struct_as_record=False)["synsets"]
    synsets = synsets if hasattr(synsets, "__iter__") else [synsets]
    id_to_wnid = {int(s.ILSVRC2012_ID): str(s.WNID) for s in synsets}
    text = wanted["data/ILSVRC2012_validation_ground_truth.txt"].decode()
    return id_to_wnid, [int(line) for line in text.split() if line]
