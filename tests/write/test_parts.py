"""Features inferred past first examples whose new column is None."""

from __future__ import annotations

import pytest

import stable_datasets as sds
from stable_datasets.errors import StableDatasetsError


def test_a_new_column_whose_first_results_are_none_takes_the_type_of_later_ones():
    """Before: 15,000 None results of 20,000 made 'cannot infer the type of new column'."""
    rows = sds.StableDataset.from_dict({"i": list(range(20_000))})
    out = rows.map(lambda r: {"v": None if r["i"] < 15_000 else r["i"] * 1.5})
    assert out.features["v"] == sds.Value("float64")
    assert out["v"][14_999] is None and out["v"][15_000] == 22_500.0 and out[19_999]["v"] == 29_998.5
    with pytest.raises(StableDatasetsError,
                       match=r"^map: new column 'w' is None in all of the first 20000 rows, so its type cannot be "
                             r"inferred; pass features= naming its type$"):
        rows.map(lambda r: {"w": None})
