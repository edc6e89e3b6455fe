"""Rock Paper Scissors: computer-rendered hands of various skin tones, ages and genders posing rock, paper or
scissors, 300x300; 2,520 train / 372 test.

One zip a split, `rps/<class>/<file>.png` and `rps-test-set/<class>/<file>.png`. The PNGs are RGBA (an artefact of
the renderer); cells decode to RGB as upstream converts them, and the PNG bytes are kept as stored. Rows come in
the zip's stored order.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import folder_label, stream_members
from stable_datasets.features import ClassLabel, Features, Image

_BASE = "https://storage.googleapis.com/download.tensorflow.org/data/"
#: split -> (file, sha256, size): TFDS's record (url_checksums/rock_paper_scissors.txt)
_FILES = {
    "train": ("rps.zip", "c2403444395842ad04c53612bad54b574443eae17a0723117a2ff87b9d72194f", 200682221),
    "test": ("rps-test-set.zip", "c27ab9fa43ce40b2e453de711365b477f4424586edf0388116674fd320f07503", 29516758),
}
LABELS = ["rock", "paper", "scissors"]


class RockPaperScissor(CatalogBuilder):
    """Rock Paper Scissors (Moroney, 2019)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://laurencemoroney.com/datasets.html",
        assets={split: DownloadInfo(_BASE + name, checksum=f"sha256:{sha}", size=size)
                for split, (name, sha, size) in _FILES.items()},
        citation="""@misc{laurence2019rock,
  title={Rock Paper Scissors Dataset},
  author={Laurence Moroney},
  year={2019},
  url={https://laurencemoroney.com/datasets.html}}""",
        license="CC By 2.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Rock Paper Scissors: images of hands from various races, ages and genders, posed into rock, "
                        "paper or scissors and labelled as such. The PNG bytes are kept as published (cells decode "
                        "to RGB).",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 2_520, "test": 372},
        )

    def _generate_examples(self, data_path, split):
        classes = {name: index for index, name in enumerate(LABELS)}

        def is_image(member: str) -> bool:
            return member.endswith(".png") and not member.startswith("__MACOSX/")

        for name, data in stream_members(data_path, is_image):
            yield name, {"image": data, "label": folder_label(name, classes, where=data_path)}
