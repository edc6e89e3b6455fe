"""HASYv2: 168,233 handwritten symbols (369 classes: Latin letters, digits, mathematical symbols), 32x32, with the
dataset's 10 cross-validation folds as configs (`fold-1` ... `fold-10`; each fold's test set is that fold).

One pass over the official `.tar.bz2` indexes it; the fold's CSV (`classification-task/fold-N/<split>.csv`:
path, symbol_id, ...) names each split's images, then the PNG members are read in place in the archive's order,
as upstream's, each kept byte for byte (read back as RGB, upstream's shape (32, 32, 3))."""

from __future__ import annotations

import csv
import io
import tarfile

from stable_datasets.builder import BuilderConfig, DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

#: no public record gives this archive's sha256 or size (Zenodo lists an md5 only): downloaded unchecked
_ARCHIVE = DownloadInfo("https://zenodo.org/record/259444/files/HASYv2.tar.bz2?download=1", filename="HASYv2.tar.bz2")
_SYMBOL_IDS_TEXT = """
    31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 59 70 71 72 73 74 75 76 77 78 79
    81 82 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 110 111 112 113 114 115 116 117
    150 151 152 153 154 155 156 157 158 159 160 161 162 163 164 165 166 167 168 169 170 171 174 175 176 177 178 179
    180 181 182 183 184 185 186 187 188 189 190 191 192 193 194 195 196 197 254 257 259 260 261 262 263 264 265 266
    267 268 269 508 510 511 512 513 514 517 520 521 523 524 526 527 528 529 530 531 532 533 534 535 536 537 538 539
    540 541 542 544 549 550 553 555 562 564 574 577 582 583 584 591 595 600 601 603 604 605 607 608 609 610 611 612
    613 614 615 616 617 618 620 621 622 630 631 634 635 636 639 640 644 647 650 661 671 678 679 683 684 698 711 712
    713 716 728 739 741 743 748 751 753 756 757 758 759 761 762 763 764 765 767 768 770 771 775 777 778 783 785 786
    788 791 792 801 809 812 817 822 823 827 837 838 881 882 884 885 886 887 888 889 890 891 892 894 901 912 913 914
    915 916 917 918 919 920 921 922 923 924 934 936 941 943 944 945 946 947 948 949 950 951 953 956 957 958 959 960
    965 968 971 972 973 974 977 992 993 994 995 996 997 998 999 1000 1004 1005 1006 1007 1008 1010 1011 1012 1013
    1016 1018 1019 1031 1037 1042 1045 1046 1051 1053 1062 1064 1065 1066 1074 1075 1077 1078 1079 1080 1082 1086
    1090 1093 1101 1102 1103 1111 1112 1115 1116 1117 1168 1169 1177 1184 1185 1187 1314 1315 1316 1317 1369 1371
    1374 1382 1385 1394 1395 1396 1400
"""
#: the 369 symbol ids, upstream's class names in its order (ascending)
SYMBOL_IDS = _SYMBOL_IDS_TEXT.split()


class HASYv2(CatalogBuilder):
    """HASYv2 (Thoma, 2017); `label` is the class of the symbol id. Row counts per fold are not published (only
    the total, 168,233 for train + test of every fold), so the splits' counts are not checked."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    BUILDER_CONFIGS = [BuilderConfig(name=f"fold-{i}", version=Version("1.0.0"),
                                     description=f"HASYv2 with fold {i} as the test set") for i in range(1, 11)]
    DEFAULT_CONFIG_NAME = "fold-1"
    SOURCE = DatasetSource(
        homepage="https://github.com/MartinThoma/HASY",
        assets={"archive": _ARCHIVE},
        citation="""@article{thoma2017hasyv2,
  title={The HASYv2 dataset},
  author={Thoma, Martin},
  journal={arXiv preprint arXiv:1701.08380},
  year={2017}}""",
        license="ODbL 1.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description=f"HASYv2 ({self.config.name} as the test set): 32x32 handwritten symbols in 369 classes.",
            features=Features({"image": Image(), "label": ClassLabel(names=SYMBOL_IDS)}),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        path = dl_manager.download(self._source().remote_files()["archive"])
        return [SplitGenerator(split, {"data_path": path, "split": split}) for split in ("train", "test")]

    def _generate_examples(self, data_path, split):
        wanted = f"classification-task/{self.config.name}/{split}.csv"
        classes = {symbol: index for index, symbol in enumerate(SYMBOL_IDS)}
        with tarfile.open(data_path) as archive:
            members = [m for m in archive.getmembers() if m.isfile()]
            table = next((m for m in members if m.name.endswith(wanted)), None)
            if table is None:
                raise StableDatasetsError(f"{data_path} lacks the member {wanted}")
            labels = _labels_by_file(archive, table, classes, data_path)
            for member in members:
                label = labels.get(member.name.rsplit("/", 1)[-1])
                if label is None:
                    continue
                fh = archive.extractfile(member)
                assert fh is not None  # a regular file always has a reader
                yield member.name, {"image": fh.read(), "label": label}


def _labels_by_file(archive: tarfile.TarFile, table: tarfile.TarInfo, classes: dict[str, int],
                    path: str) -> dict[str, int]:
    """{image file name: class} from a fold's CSV (columns path, symbol_id, ...)."""
    fh = archive.extractfile(table)
    assert fh is not None
    labels = {}
    for line, row in enumerate(csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8")), start=2):
        symbol = row.get("symbol_id")
        if symbol not in classes:
            raise StableDatasetsError(f"{path}:{table.name} line {line}: unknown symbol_id {symbol!r}")
        labels[row["path"].rsplit("/", 1)[-1]] = classes[symbol]
    return labels
