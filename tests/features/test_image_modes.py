"""Images as users hold them: PIL images in, grayscale/alpha/16-bit kept when the feature asks, PIL out."""

from __future__ import annotations

import io

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import EncodingError

PIL = pytest.importorskip("PIL.Image")

rng = np.random.default_rng(7)
RGB = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
RGBA = np.dstack([RGB, rng.integers(0, 256, (5, 7), dtype=np.uint8)])
GRAY = rng.integers(0, 256, (5, 7), dtype=np.uint8)
GRAY16 = rng.integers(0, 65536, (5, 7), dtype=np.uint16)


def _round_trip(feature, value):
    stored = feature.encode(value, "img")
    return feature.decode(stored)


def test_pil_image_without_array_method_is_accepted():
    image = PIL.fromarray(RGB)
    assert hasattr(image, "__array_interface__")  # Pillow 13 has no __array__
    np.testing.assert_array_equal(_round_trip(sds.Image(), image), RGB)


@pytest.mark.parametrize(("mode", "array"), [("RGBA", RGBA), ("L", GRAY), ("RGB", RGB)])
def test_modes_keep_alpha_and_grayscale_from_arrays_and_pil(mode, array):
    feature = sds.Image(mode=mode)
    for value in (array, PIL.fromarray(array)):
        out = _round_trip(feature, value)
        assert out.dtype == np.uint8 and out.shape == array.shape
        np.testing.assert_array_equal(out, array)


def test_default_mode_is_rgb_and_rgba_mode_adds_opaque_alpha():
    np.testing.assert_array_equal(_round_trip(sds.Image(), RGBA), RGB)  # the documented default drops alpha
    out = _round_trip(sds.Image(mode="RGBA"), RGB)
    np.testing.assert_array_equal(out[..., :3], RGB)
    assert (out[..., 3] == 255).all()
    np.testing.assert_array_equal(_round_trip(sds.Image(mode="RGBA"), GRAY)[..., 0], GRAY)


def test_16_bit_png_is_kept_exactly():
    feature = sds.Image(mode="I;16")
    out = _round_trip(feature, GRAY16)
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, GRAY16)
    # a 16-bit PNG file made by Pillow, passed as bytes and as the PIL image it opens to (mode "I;16" or "I")
    buffer = io.BytesIO()
    PIL.fromarray(GRAY16).save(buffer, format="PNG")
    np.testing.assert_array_equal(_round_trip(feature, buffer.getvalue()), GRAY16)
    np.testing.assert_array_equal(_round_trip(feature, PIL.open(io.BytesIO(buffer.getvalue()))), GRAY16)
    rgb16 = rng.integers(0, 65536, (3, 4, 3), dtype=np.uint16)
    np.testing.assert_array_equal(_round_trip(sds.Image(mode="unchanged"), rgb16), rgb16)
    with pytest.raises(EncodingError, match="16-bit images can be stored as png only, not jpeg"):
        sds.Image(format="jpeg").encode(GRAY16, "img")


def test_pil_palette_and_bilevel_images_are_converted_not_misread():
    palette = PIL.fromarray(RGB).convert("P", palette=PIL.Palette.ADAPTIVE, colors=8)
    expected = np.asarray(palette.convert("RGB"))
    np.testing.assert_array_equal(_round_trip(sds.Image(), palette), expected)
    bilevel = PIL.fromarray(GRAY).convert("1")
    np.testing.assert_array_equal(_round_trip(sds.Image(mode="L"), bilevel), np.asarray(bilevel.convert("L")))
    with pytest.raises(EncodingError, match="field 'img': PIL images of mode 'F' are not supported"):
        sds.Image().encode(PIL.fromarray(GRAY.astype(np.float32)), "img")


def test_pil_decode_option_returns_pil_images():
    feature = sds.Image(mode="RGBA", decode_to="pil")
    out = _round_trip(feature, RGBA)
    assert isinstance(out, PIL.Image) and out.mode == "RGBA" and out.size == (7, 5)
    np.testing.assert_array_equal(np.asarray(out), RGBA)
    assert _round_trip(sds.Image(mode="L", decode_to="pil"), GRAY).mode == "L"


def test_modes_survive_a_build_and_reopen(write_builder):
    source = """
    import numpy as np
    import stable_datasets as sds

    class Masks(sds.GeneratorBasedBuilder):
        def _info(self):
            return sds.DatasetInfo(features=sds.Features({"mask": sds.Image(mode="L"), "rgba": sds.Image(mode="RGBA")}))

        def _split_generators(self, dl_manager):
            return [sds.SplitGenerator("train", {})]

        def _generate_examples(self):
            for i in range(3):
                yield i, {"mask": np.full((2, 3), i, np.uint8), "rgba": np.full((2, 3, 4), i * 10, np.uint8)}
    """
    ds = sds.load_dataset(str(write_builder("masks", source)), split="train")
    assert ds[2]["mask"].shape == (2, 3) and (ds[2]["mask"] == 2).all()
    assert ds[1]["rgba"].shape == (2, 3, 4) and (ds[1]["rgba"] == 10).all()
    assert ds.features["mask"] == sds.Image(mode="L")


def test_bad_mode_and_decode_option_are_refused():
    with pytest.raises(ValueError, match="unsupported image mode 'CMYK'"):
        sds.Image(mode="CMYK")
    with pytest.raises(ValueError, match="decode_to must be 'numpy' or 'pil'"):
        sds.Image(decode_to="torch")
