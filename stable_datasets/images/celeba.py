"""CelebA: 202,599 aligned and cropped celebrity faces with 40 binary attributes each; 162,770 train / 19,867
validation / 19,962 test, the official partition.

Three files from the authors' Google Drive: `img_align_celeba.zip` (`img_align_celeba/<000001>.jpg`),
`list_attr_celeba.txt` (a count line, the 40 attribute names, then "<image> <40 values of -1 or 1>") and
`list_eval_partition.txt` ("<image> <0 train, 1 validation, 2 test>"). `attributes` holds the 40 values in the
file's order as ClassLabel names "-1" / "1" (indices 0 / 1). Rows come in the lists' order, the JPEG bytes as
stored. Drive serves the 1.4 GB zip only after a confirmation page, so its direct-download address comes first.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Split, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image, Sequence

_DRIVE = "https://drive.google.com/uc?export=download&id="
_USERCONTENT = "https://drive.usercontent.google.com/download?export=download&confirm=t&id="
#: asset -> (Drive id, file name, sha256, size): TFDS's record (url_checksums/celeb_a.txt)
_FILES = {
    "archive": ("0B7EVK8r0v71pZjFTYXZWM3FlRnM", "img_align_celeba.zip",
                "46fb89443c578308acf364d7d379fe1b9efb793042c0af734b6112e4fd3a8c74", 1443490838),
    "attributes": ("0B7EVK8r0v71pblRyaVFSWGxPY0U", "list_attr_celeba.txt",
                   "f0e5da289d5ccf75ffe8811132694922b60f2af59256ed362afa03fefba324d0", 26721026),
    "partition": ("0B7EVK8r0v71pY0NSMzRuSXJEVkk", "list_eval_partition.txt",
                  "fc955bcb3ef8fbdf7d5640d9a8693a8431b5f2ee291a5c1449a1549e7e073fe7", 2836386),
}
ATTRIBUTE_COUNT = 40
_PARTITIONS = {Split.TRAIN: "0", Split.VALIDATION: "1", Split.TEST: "2"}


class CelebA(CatalogBuilder):
    """Large-scale CelebFaces Attributes (Liu et al., 2015), the aligned and cropped images."""

    VERSION = Version("1.0.0")
    TASK = "face attributes"
    SOURCE = DatasetSource(
        homepage="http://mmlab.ie.cuhk.edu.hk/projects/CelebA.html",
        assets={key: DownloadInfo(_USERCONTENT + drive_id, [_DRIVE + drive_id], f"sha256:{sha}", name, size)
                for key, (drive_id, name, sha, size) in _FILES.items()},
        citation="""@inproceedings{liu2015faceattributes,
  title={Deep Learning Face Attributes in the Wild},
  author={Liu, Ziwei and Luo, Ping and Wang, Xiaogang and Tang, Xiaoou},
  booktitle={Proceedings of International Conference on Computer Vision (ICCV)},
  month={December},
  year={2015}}""",
        license="non-commercial research purposes only",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="CelebA: over 200K celebrity face images with 40 binary attribute annotations each, for "
                        "face attribute recognition. The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "attributes": Sequence(ClassLabel(names=["-1", "1"]))}),
            supervised_keys=("image", "attributes"),
            num_examples={"train": 162_770, "validation": 19_867, "test": 19_962},
        )

    def _split_generators(self, dl_manager):
        paths = dl_manager.download(self._source().remote_files())
        return [SplitGenerator(split, {"paths": paths, "partition": partition})
                for split, partition in _PARTITIONS.items()]

    def _generate_examples(self, paths, partition):
        attributes = _attribute_rows(paths["attributes"])
        names = []
        with open(paths["partition"], encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) != 2 or fields[0] not in attributes:
                    raise StableDatasetsError(f"{paths['partition']} line {number}: expected '<image> <0|1|2>' "
                                              f"naming an image of {paths['attributes']}, got {line.strip()!r}")
                if fields[1] == partition:
                    names.append(fields[0])
        members = [f"img_align_celeba/{name}" for name in names]
        for index, (name, (_, fh)) in enumerate(zip(names, members_in_order(paths["archive"], members))):
            yield index, {"image": fh.read(), "attributes": attributes[name]}


def _attribute_rows(path: str) -> dict[str, list[str]]:
    """{image: its 40 values ("-1" or "1")} from list_attr_celeba.txt (after its count and names lines)."""
    rows: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            fields = line.split()
            if number <= 2 or not fields:
                continue
            values = fields[1:]
            if len(values) != ATTRIBUTE_COUNT or not set(values) <= {"-1", "1"}:
                raise StableDatasetsError(f"{path} line {number}: expected an image and {ATTRIBUTE_COUNT} values of "
                                          f"-1 or 1, got {len(values)} values")
            rows[fields[0]] = values
    return rows
