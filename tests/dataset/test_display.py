"""How rows and datasets print and show in a notebook."""

from __future__ import annotations

import pickle
import re

import numpy as np

import stable_datasets as sds
from stable_datasets.dataset.display import DisplayRow, cell_text


def _images() -> sds.StableDataset:
    rng = np.random.default_rng(0)
    return sds.StableDataset.from_dict(
        {"image": [rng.integers(0, 255, (32, 32, 3), dtype=np.uint8) for _ in range(7)], "label": list(range(7)),
         "text": ["short", "x" * 500, "a", "b", "c", "d", "e"]},
        features=sds.Features({"image": sds.Image(), "label": sds.ClassLabel(names=list("abcdefg")),
                               "text": sds.Value("string")}))


def test_a_row_prints_its_image_compactly_and_is_still_a_dict():
    ds = _images()
    row = ds[0]
    assert repr(row) == "{'image': Image(32x32 RGB), 'label': 0, 'text': 'short'}"
    assert isinstance(row, dict) and row["image"].shape == (32, 32, 3)
    assert set(row) == {"image", "label", "text"}
    assert repr(ds[1]).endswith("'text': " + repr("x" * 80) + "... (500 chars)}")
    restored = pickle.loads(pickle.dumps(row))
    assert type(restored) is dict and np.array_equal(restored["image"], row["image"])


def test_cell_texts():
    assert cell_text(np.zeros((8, 8), np.uint8)) == "Image(8x8 L)"
    assert cell_text(np.zeros((4, 6, 4), np.uint8)) == "Image(6x4 RGBA)"
    assert cell_text(np.arange(3)) == "[0, 1, 2]"
    assert cell_text(np.zeros((10, 10), np.float32)) == "array(shape=(10, 10), dtype=float32)"
    assert cell_text(list(range(20))) == "[0, 1, 2, 3, 4, 5, 6, 7, ... (20 items)]"
    assert cell_text(b"abc") == "<3 bytes>"
    assert repr(DisplayRow({"a": [np.zeros((2, 3, 3), np.uint8)]})) == "{'a': [Image(3x2 RGB)]}"


def test_head_prints_a_table_of_the_first_rows():
    ds = _images()
    head = ds.head(3)
    assert len(head) == 3 and [r["label"] for r in head] == [0, 1, 2]
    lines = repr(head).splitlines()
    assert re.split(r"\s{2,}", lines[0].strip()) == ["image", "label", "text"]
    assert re.split(r"\s{2,}", lines[1]) == ["0", "Image(32x32 RGB)", "0", "'short'"]
    assert len(ds.head(100)) == 7 and len(ds.head(0)) == 0
    assert type(pickle.loads(pickle.dumps(head))) is list


def test_notebook_views_inline_thumbnails():
    ds = _images()
    html = ds._repr_html_()
    assert html.count('<img src="data:image/png;base64,') == 5  # the first five rows
    assert "7 rows" in html and "<code>image</code>" in html
    assert ds[0]._repr_html_().count("<img") == 1
    assert sds.DatasetDict({"train": ds, "test": ds})._repr_html_().count("<h4>") == 2
    assert "&lt;" in cell_html_of("<b>")


def cell_html_of(text: str) -> str:
    from stable_datasets.dataset.display import cell_html

    return cell_html(text)


def test_torch_rows_stay_plain_dicts():
    ds = _images().with_format("numpy")
    assert repr(ds[0]).startswith("{'image': Image(32x32 RGB)")
