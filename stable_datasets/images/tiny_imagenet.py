"""Tiny ImageNet (Le & Yang, 2015): 200 ImageNet classes at 64x64, 100,000 train / 10,000 validation / 10,000
test JPEGs, read from `tiny-imagenet-200.zip` member by member (never extracted); the JPEG bytes are kept as in
the archive. The test split has no labels: its `label` is null (upstream writes -1)."""

from __future__ import annotations

import zipfile

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

_ROOT = "tiny-imagenet-200/"
#: no public sha256 or size record exists for this file (torchvision-style code only gives an md5), so the
#: download is not checked
_ARCHIVE = DownloadInfo("http://cs231n.stanford.edu/tiny-imagenet-200.zip")

#: upstream's class order (the order of the archive's wnids.txt); the label is the index in it
WNIDS = [
    "n02124075", "n04067472", "n04540053", "n04099969", "n07749582", "n01641577", "n02802426", "n09246464", "n07920052",
    "n03970156", "n03891332", "n02106662", "n03201208", "n02279972", "n02132136", "n04146614", "n07873807", "n02364673",
    "n04507155", "n03854065", "n03838899", "n03733131", "n01443537", "n07875152", "n03544143", "n09428293", "n03085013",
    "n02437312", "n07614500", "n03804744", "n04265275", "n02963159", "n02486410", "n01944390", "n09256479", "n02058221",
    "n04275548", "n02321529", "n02769748", "n02099712", "n07695742", "n02056570", "n02281406", "n01774750", "n02509815",
    "n03983396", "n07753592", "n04254777", "n02233338", "n04008634", "n02823428", "n02236044", "n03393912", "n07583066",
    "n04074963", "n01629819", "n09332890", "n02481823", "n03902125", "n03404251", "n09193705", "n03637318", "n04456115",
    "n02666196", "n03796401", "n02795169", "n02123045", "n01855672", "n01882714", "n02917067", "n02988304", "n04398044",
    "n02843684", "n02423022", "n02669723", "n04465501", "n02165456", "n03770439", "n02099601", "n04486054", "n02950826",
    "n03814639", "n04259630", "n03424325", "n02948072", "n03179701", "n03400231", "n02206856", "n03160309", "n01984695",
    "n03977966", "n03584254", "n04023962", "n02814860", "n01910747", "n04596742", "n03992509", "n04133789", "n03937543",
    "n02927161", "n01945685", "n02395406", "n02125311", "n03126707", "n04532106", "n02268443", "n02977058", "n07734744",
    "n03599486", "n04562935", "n03014705", "n04251144", "n04356056", "n02190166", "n03670208", "n02002724", "n02074367",
    "n04285008", "n04560804", "n04366367", "n02403003", "n07615774", "n04501370", "n03026506", "n02906734", "n01770393",
    "n04597913", "n03930313", "n04118538", "n04179913", "n04311004", "n02123394", "n04070727", "n02793495", "n02730930",
    "n02094433", "n04371430", "n04328186", "n03649909", "n04417672", "n03388043", "n01774384", "n02837789", "n07579787",
    "n04399382", "n02791270", "n03089624", "n02814533", "n04149813", "n07747607", "n03355925", "n01983481", "n04487081",
    "n03250847", "n03255030", "n02892201", "n02883205", "n03100240", "n02415577", "n02480495", "n01698640", "n01784675",
    "n04376876", "n03444034", "n01917289", "n01950731", "n03042490", "n07711569", "n04532670", "n03763968", "n07768694",
    "n02999410", "n03617480", "n06596364", "n01768244", "n02410509", "n03976657", "n01742172", "n03980874", "n02808440",
    "n02226429", "n02231487", "n02085620", "n01644900", "n02129165", "n02699494", "n03837869", "n02815834", "n07720875",
    "n02788148", "n02909870", "n03706229", "n07871810", "n03447447", "n02113799", "n12267677", "n03662601", "n02841315",
    "n07715103", "n02504458",
]


class TinyImagenet(CatalogBuilder):
    """Tiny ImageNet: `train`, `validation` (labels from val_annotations.txt) and `test` (unlabelled)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://www.kaggle.com/c/tiny-imagenet",
        assets={"train": _ARCHIVE, "validation": _ARCHIVE, "test": _ARCHIVE},
        citation="""@inproceedings{Le2015TinyIV,
  title={Tiny ImageNet Visual Recognition Challenge},
  author={Ya Le and Xuan S. Yang},
  year={2015}}""",
        license="MIT License",
    )

    @staticmethod
    def _labels() -> list[str]:
        return list(WNIDS)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Tiny ImageNet: 200 ImageNet classes downsized to 64x64 colour images; 500 training, 50 "
                        "validation and 50 test images per class. Test images are unlabelled (label null).",
            features=Features({"image": Image(), "label": ClassLabel(names=WNIDS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 100_000, "validation": 10_000, "test": 10_000},
        )

    def _generate_examples(self, data_path, split):
        """Train: class folders sorted, images sorted by name in each; validation: val_annotations.txt's order;
        test: images sorted by name."""
        with zipfile.ZipFile(data_path) as archive:
            names = [info.filename for info in archive.infolist() if not info.is_dir()]
            present = set(names)
            for key, member, label in _split_members(str(data_path), archive, names, split):
                if member not in present:
                    raise StableDatasetsError(f"{data_path} lacks the member {member} ({split} split)")
                yield key, {"image": archive.read(member), "label": label}


def _split_members(path: str, archive: zipfile.ZipFile, names: list[str], split: str):
    """(key, member, label) of a split, in upstream's order (made deterministic where it listed a folder)."""
    if split == "train":
        by_class: dict[str, list[str]] = {}
        for name in names:
            parts = name[len(_ROOT):].split("/")
            if name.startswith(_ROOT + "train/") and len(parts) == 4 and parts[2] == "images":
                by_class.setdefault(parts[1], []).append(name)
        for wnid in sorted(by_class):
            for member in sorted(by_class[wnid]):
                yield member.rsplit("/", 1)[-1], member, wnid
    elif split == "validation":
        annotations = _ROOT + "val/val_annotations.txt"
        if annotations not in names:
            raise StableDatasetsError(f"{path} lacks the member {annotations}")
        for number, line in enumerate(archive.read(annotations).decode().splitlines(), 1):
            if line.strip():
                fields = line.split("\t")
                if len(fields) < 2:
                    raise StableDatasetsError(f"{path}:{annotations} line {number}: expected file<TAB>wnid, "
                                              f"got {line!r}")
                yield fields[0], _ROOT + "val/images/" + fields[0], fields[1]
    else:
        for member in sorted(n for n in names if n.startswith(_ROOT + "test/images/")):
            yield member.rsplit("/", 1)[-1], member, None
