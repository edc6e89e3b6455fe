"""A missing optional package names the extra that installs it, and every extra named exists."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.errors import MissingExtraError

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_every_extra_an_error_names_exists():
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert {"pandas", "polars", "hf", "pil", "torch"} <= set(extras)
    assert extras["pandas"] == ["pandas>=2"] and extras["hf"] == ["datasets>=3"]


@pytest.mark.parametrize(("module", "call", "message"), [
    ("polars", lambda ds: ds.to_polars(), "to_polars needs polars: pip install 'stable-datasets[polars]'"),
    ("pandas", lambda ds: ds.to_pandas(), "to_pandas needs pandas: pip install 'stable-datasets[pandas]'"),
    ("datasets", lambda ds: ds.to_hf(),
     "Hugging Face interop needs the datasets package: pip install 'stable-datasets[hf]'"),
    ("torch", lambda ds: ds.with_format("torch")[0],
     "with_format('torch') needs PyTorch: pip install 'stable-datasets[torch]'"),
])
def test_a_missing_package_names_its_extra(monkeypatch, module, call, message):
    ds = sds.StableDataset.from_dict({"x": [1, 2]})
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails as if it were not installed
    with pytest.raises(MissingExtraError) as raised:
        call(ds)
    assert str(raised.value) == message
    assert isinstance(raised.value, ImportError)
