"""Cars3D from a miniature `nips2015-analogy-data.tar.gz` laid out as the official one (data/cars/*.mat holding
`im` (128, 128, 3, azimuths, elevations), beside the archive's other datasets) under the official URL. The stand-in
cars have 3 azimuths x 2 elevations (the real ones 24 x 4). Ports upstream's checks: keys, (128, 128, 3) uint8,
label == [car_type, elevation, azimuth]; cars numbered in the sorted order of their names."""

from __future__ import annotations

import io

import numpy as np
import scipy.io

import stable_datasets as sds
from stable_datasets.images import Cars3D
from tests.fixtures.catalog import colour, digit_images, serve_urls, tar_bytes

URL = "http://www.scottreed.info/files/nips2015-analogy-data.tar.gz"


def _mat(views: np.ndarray) -> bytes:
    buf = io.BytesIO()
    scipy.io.savemat(buf, {"im": views}, do_compression=True)
    return buf.getvalue()


def test_cars3d_rows_run_over_elevations_then_azimuths(monkeypatch):
    gray, _ = digit_images(12, 128)
    rgb = colour(gray)  # (12, 128, 128, 3): car c, elevation e, azimuth a is image 6c + 3e + a
    views = [rgb[6 * c:6 * c + 6].reshape(2, 3, 128, 128, 3).transpose(2, 3, 4, 1, 0) for c in range(2)]
    archive = tar_bytes({"data/sprites/sprites_splits.mat": b"not a car",
                         "data/cars/car_002_mesh.mat": _mat(views[1]),  # stored before car_001: order by name
                         "data/cars/car_001_mesh.mat": _mat(views[0]),
                         "data/cars/README.txt": b"cars"})
    with serve_urls(monkeypatch, {URL: archive}):
        train = Cars3D(split="train", verification_mode="no_checks")
        tail = sds.load_dataset("cars3d", split="train[6:]", verification_mode="no_checks")
    assert len(train) == 12 and len(tail) == 6
    sample = train[4]
    assert set(sample) == {"image", "car_type", "elevation", "azimuth", "label"}
    assert sample["image"].shape == (128, 128, 3) and sample["image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["image"], rgb[4])
    assert sample["label"] == [0, 1, 1] == [sample["car_type"], sample["elevation"], sample["azimuth"]]
    assert train["azimuth"] == [0, 1, 2] * 4 and train["elevation"] == [0, 0, 0, 1, 1, 1] * 2
    assert tail["car_type"] == [1] * 6
    np.testing.assert_array_equal(tail[5]["image"], rgb[11])
    assert train.info.num_examples == {"train": 17_568}
