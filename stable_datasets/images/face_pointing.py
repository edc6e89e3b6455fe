"""Face Pointing (the Head Pose Image Database): 15 people, each photographed in 2 series of 93 head poses; the
pose is the vertical (tilt) and horizontal (pan) angle in degrees.

One archive of JPEGs whose names carry the labels: `person<PP><NNN><tilt><pan>.jpg` (PP the person, NNN the
series and image number, tilt and pan signed, as in `person01100-90+0.jpg`); other members (the bounding-box text
files) are skipped, as upstream skips them. One `train` split as upstream has it; rows come in the archive's
stored order, the JPEG bytes as stored. No checksum of the archive and no row count are on public record, so both
are left unset.
"""

from __future__ import annotations

import re

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import stream_members
from stable_datasets.features import Features, Image, Sequence, Value

#: person id (2 digits), image number, tilt, pan
_POSE = re.compile(r"person(\d{2})\d+([+-]\d+)([+-]\d+)")


class FacePointing(CatalogBuilder):
    """Head Pose Image Database (Gourier et al., 2004): `angles` is [tilt, pan] in degrees."""

    VERSION = Version("1.0.0")
    TASK = "head pose estimation"
    SOURCE = DatasetSource(
        homepage="http://crowley-coutaz.fr/HeadPoseDataSet/",
        assets={"train": DownloadInfo(
            "http://crowley-coutaz.fr/HeadPoseDataSet/HeadPoseImageDatabase.tar.gz",
            ["http://www-prima.inrialpes.fr/perso/Gourier/Faces/HeadPoseImageDatabase.tar.gz"])},  # its first home
        citation="""@inproceedings{gourier2004estimating,
  title={Estimating face orientation from robust detection of salient facial features},
  author={Gourier, Nicolas and Hall, Daniela and Crowley, James L},
  booktitle={ICPR International Workshop on Visual Observation of Deictic Gestures},
  year={2004},
  organization={Citeseer}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="The head pose database: 15 sets of images, each 2 series of 93 images of the same person "
                        "at different poses (tilt and pan angles). The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "person_id": Value("int32"), "angles": Sequence(Value("int32"))}),
            supervised_keys=("image", "angles"),
        )

    def _generate_examples(self, data_path, split):
        def is_pose_image(member: str) -> bool:
            return member.endswith(".jpg") and _POSE.search(member) is not None

        for name, data in stream_members(data_path, is_pose_image):
            person, tilt, pan = map(int, _POSE.search(name).groups())  # type: ignore[union-attr]
            yield name, {"image": data, "person_id": person, "angles": [tilt, pan]}
