"""An image header claiming more pixels than STABLE_DATASETS_MAX_IMAGE_PIXELS is refused before any decoder
allocates them, naming the file (or the stored cell)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib

import cv2
import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import CorruptCellError
from stable_datasets.features.image import image_size


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _claiming_png(width: int, height: int) -> bytes:
    """A structurally whole PNG (chunks and CRCs right) whose header claims width x height, with a few bytes of
    pixels: what OpenCV allocates for before it finds the data short."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(b"\x00" * 64))
            + _chunk(b"IEND", b""))


LOAD = """
import sys
import stable_datasets as sds
try:
    sds.load_dataset("imagefolder", data_dir=sys.argv[1], split="train")
finally:  # this process's own peak: ru_maxrss would start at the RSS of the process that forked us (Linux)
    print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) * 1024)
"""


def test_a_png_claiming_20000_by_20000_is_refused_naming_the_file_without_allocating(tmp_path):
    folder = tmp_path / "imgs"
    for name in ("a", "b"):
        (folder / name).mkdir(parents=True)
        cv2.imwrite(str(folder / name / "ok.png"), np.zeros((4, 4, 3), np.uint8))
    bomb = folder / "b" / "bomb.png"
    bomb.write_bytes(_claiming_png(20_000, 20_000))
    run = subprocess.run([sys.executable, "-c", LOAD, str(folder)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 1, run.stderr[-2000:]
    assert (f"image file '{bomb}': its header claims 20000x20000 pixels, over the limit of 178956970 "
            "(STABLE_DATASETS_MAX_IMAGE_PIXELS); raise it if the image is meant to be that big") in run.stderr, \
        run.stderr[-2000:]
    assert int(run.stdout.split()[-1]) < 1 << 30


def test_a_stored_image_over_the_limit_is_refused_when_read(monkeypatch):
    monkeypatch.setenv("STABLE_DATASETS_MAX_IMAGE_PIXELS", str(10**9))
    ds = sds.StableDataset.from_dict({"image": [_claiming_png(20_000, 20_000)]},
                                     features=sds.Features({"image": sds.Image()}))
    monkeypatch.setenv("STABLE_DATASETS_MAX_IMAGE_PIXELS", "1000000")
    with pytest.raises(CorruptCellError, match=r"^stored image of \d+ bytes: its header claims 20000x20000 pixels, "
                                               r"over the limit of 1000000 \(STABLE_DATASETS_MAX_IMAGE_PIXELS\)"):
        ds[0]


@pytest.mark.parametrize("ext", [".png", ".jpg", ".webp", ".bmp"])
def test_image_size_reads_the_header_of_each_format(ext):
    data = cv2.imencode(ext, np.zeros((37, 53, 3), np.uint8))[1].tobytes()
    assert image_size(data) == (53, 37)


@pytest.mark.parametrize("shape", [(5, 7, 3), (5, 7), (5, 7, 4)])
def test_bmp_cells_are_lossless_in_every_layout(shape):
    """BMP: the small-image format that encodes and decodes fastest; the pixels come back exactly."""
    pixels = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    stored = sds.Image(format="bmp").encode(pixels, "image")
    assert stored[:2] == b"BM" and image_size(stored) == (7, 5)
    mode = {2: "L", 3: "RGB", 4: "RGBA"}[shape[2] if len(shape) == 3 else 2]
    np.testing.assert_array_equal(sds.Image(mode=mode).decode(stored), pixels)
    with pytest.raises(ValueError, match="16-bit images can be stored as png only, not bmp"):
        sds.Image(format="bmp").encode(pixels.astype(np.uint16), "image")


def test_gray_pngs_in_mode_l_give_pils_values_by_the_direct_path():
    """An 8-bit grayscale PNG is read as is in mode "L" (no colour decode); 16-bit and colour ones as before."""
    import io

    from PIL import Image as PILImage

    from stable_datasets.features.image import _is_8bit_gray_png

    gray = np.random.default_rng(1).integers(0, 256, (9, 11), dtype=np.uint8)
    deep = gray.astype(np.uint16) * 257
    for pixels in (gray, deep, np.dstack([gray, gray // 2, 255 - gray])):
        stored = cv2.imencode(".png", pixels)[1].tobytes()
        expected = np.asarray(PILImage.open(io.BytesIO(stored)).convert("L")) if pixels.dtype == np.uint8 else \
            (pixels >> 8).astype(np.uint8)
        np.testing.assert_array_equal(sds.Image(mode="L").decode(stored), expected)
        assert _is_8bit_gray_png(stored) == (pixels is gray)
