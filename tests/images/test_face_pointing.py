"""Face Pointing from a miniature official archive: PersonPP/personPPNNN<tilt><pan>.jpg and bounding-box files."""

from __future__ import annotations

import numpy as np

import stable_datasets as sds
from stable_datasets.images import FacePointing
from tests.fixtures.catalog import serve_urls, tar_bytes
from tests.fixtures.image_archives import decoded, photos, stored_images

URL = "http://crowley-coutaz.fr/HeadPoseDataSet/HeadPoseImageDatabase.tar.gz"


def test_face_pointing_person_and_angles_from_the_file_names(monkeypatch):
    jpgs = photos(3)
    archive = tar_bytes({"Person01/person01100-90+0.jpg": jpgs[0], "Person01/person01100-90+0.txt": b"bbox\n",
                         "Person15/person15246+30-45.jpg": jpgs[1], "Person02/person02113+0+90.jpg": jpgs[2],
                         "Person02/notes.jpg": jpgs[0]})
    with serve_urls(monkeypatch, {URL: archive}):
        train = FacePointing(split="train", verification_mode="no_checks")
        again = sds.load_dataset("face_pointing", split="train[1:]", verification_mode="no_checks")
    assert len(train) == 3 and len(again) == 2
    assert set(train[0]) == {"image", "person_id", "angles"}
    assert stored_images(train) == jpgs  # archive order, the JPEG bytes as published
    assert train["person_id"] == [1, 15, 2] and again["person_id"] == [15, 2]
    assert train["angles"] == [[-90, 0], [30, -45], [0, 90]]
    np.testing.assert_array_equal(train[1]["image"], decoded(jpgs[1]))
    assert train.features["person_id"].dtype == "int32"
