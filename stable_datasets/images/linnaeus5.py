"""Linnaeus 5: 8,000 colour photos, 256x256, of berries, birds, dogs, flowers and other things (a negative class);
1,200 train / 400 test a class (6,000 / 2,000).

One RAR archive, `Linnaeus 5 256X256/{train,test}/<class>/<file>.jpg`, read member by member through rarfile (the
`formats` extra; the published archive is compressed, so one of unrar, unar, 7z or bsdtar must be on PATH too).
Rows come in the archive's stored order, the JPEG bytes as stored. No checksum of the archive is on public
record, so its checksum and size are left unset.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import folder_label, stream_members
from stable_datasets.features import ClassLabel, Features, Image

_ARCHIVE = DownloadInfo("http://chaladze.com/l5/img/Linnaeus%205%20256X256.rar", filename="Linnaeus_5_256X256.rar")
LABELS = ["berry", "bird", "dog", "flower", "other"]


class Linnaeus5(CatalogBuilder):
    """Linnaeus 5 (Chaladze and Kalatozishvili, 2017), the 256x256 version."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    EXTRA = "formats"
    SOURCE = DatasetSource(
        homepage="http://chaladze.com/l5/",
        assets={"train": _ARCHIVE, "test": _ARCHIVE},
        citation="""@article{chaladze2017linnaeus,
  title={Linnaeus 5 dataset for machine learning},
  author={Chaladze, G and Kalatozishvili, L},
  journal={chaladze.com},
  year={2017}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Linnaeus 5: 256x256 colour images in 5 classes (berry, bird, dog, flower, other), 1,200 "
                        "training and 400 test images per class. The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 6_000, "test": 2_000},
        )

    def _generate_examples(self, data_path, split):
        classes = {name: index for index, name in enumerate(LABELS)}

        def in_split(member: str) -> bool:
            lowered = member.lower()
            return f"/{split}/" in lowered and lowered.endswith((".jpg", ".jpeg")) and \
                folder_label(member, classes) is not None

        for name, data in stream_members(data_path, in_split):
            yield name, {"image": data, "label": folder_label(name, classes)}
