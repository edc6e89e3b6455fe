"""Galaxy10 DECaLS from a miniature HDF5 file laid out as the official one (`images` (N, 256, 256, 3) uint8,
`ans`, `ra`, `dec`, `redshift`, `pxscale`) under the official URL. Ports upstream's checks: keys, (256, 256, 3)
uint8, labels 0-9, ra in [0, 360], dec in [-90, 90], the 10 class names."""

from __future__ import annotations

import io

import h5py
import numpy as np

import stable_datasets as sds
from stable_datasets.images import Galaxy10Decal
from tests.fixtures.catalog import colour, digit_images, serve_urls

URL = "https://zenodo.org/records/10845026/files/Galaxy10_DECals.h5"


def test_galaxy10_decal_rows(monkeypatch):
    gray, digits = digit_images(4, 256)
    rgb = colour(gray)
    ra, dec = np.array([10.5, 200.25, 359.0, 0.0]), np.array([-89.5, 0.0, 12.125, 45.0])
    redshift, pxscale = np.array([0.01, np.nan, 0.2, 0.05]), np.full(4, 0.262)
    buf = io.BytesIO()
    with h5py.File(buf, "w") as h5:
        h5["images"], h5["ans"] = rgb, digits.astype(np.uint8)
        h5["ra"], h5["dec"], h5["redshift"], h5["pxscale"] = ra, dec, redshift, pxscale
    with serve_urls(monkeypatch, {URL: buf.getvalue()}):
        train = Galaxy10Decal(split="train", verification_mode="no_checks")
        tail = sds.load_dataset("galaxy10_decal", split="train[2:]", verification_mode="no_checks")
    assert len(train) == 4 and len(tail) == 2
    sample = train[2]
    assert set(sample) == {"image", "label", "ra", "dec", "redshift", "pxscale"}
    assert sample["image"].shape == (256, 256, 3) and sample["image"].dtype == np.uint8
    np.testing.assert_array_equal(sample["image"], rgb[2])
    assert train["label"] == digits.tolist()
    assert train["ra"] == ra.tolist() and train["dec"] == dec.tolist() and train["pxscale"] == pxscale.tolist()
    assert np.isnan(train["redshift"][1]) and tail["redshift"] == [0.2, 0.05]
    assert train.features["label"].names[0] == "Disturbed Galaxies"
    assert train.features["label"].names[-1] == "Edge-on Galaxies with Bulge"
    assert train.info.num_examples == {"train": 17_736}
