"""The package is typed (PEP 561): mypy sees real types in a user's code, not Any."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stable_datasets

pytest.importorskip("mypy")

ROOT = Path(stable_datasets.__file__).resolve().parent.parent

SNIPPET = """
import stable_datasets as sds

ds = sds.load_dataset("digits", split="train")
splits = sds.load_dataset("digits")
reveal_type(ds)
reveal_type(splits)
reveal_type(splits["train"])
reveal_type(ds[0])
reveal_type(ds[0:3])
reveal_type(ds["label"])
reveal_type(ds.features)
reveal_type(ds.shuffle(seed=0).select([1, 2]).with_format("numpy"))
reveal_type(ds.map(lambda row: row))
reveal_type(ds.train_test_split(test_size=0.1))
reveal_type(sds.open_cache("somewhere"))
reveal_type(sds.load_builder("digits").prepare("train"))
reveal_type(sds.Features.from_dict({"a": {"_type": "Value", "dtype": "int64"}}))
reveal_type(sds.list_builders())
reveal_type(sds.concatenate_datasets([ds, ds]))
reveal_type(sds.load_builder("digits").as_dataset("train"))
for row in ds:
    reveal_type(row)
ds.select("not indices")
reveal_type(sds.StableDataset.from_dict({"a": [1]}))
reveal_type(ds.rename_column("label", "y").to_dict())
reveal_type(ds.to_hf())
"""

EXPECTED = [
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "stable_datasets.dataset.dataset_dict.DatasetDict",
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "dict[str, Any]",
    "dict[str, Any]",
    "list[Any] | numpy.ndarray[tuple[Any, ...], numpy.dtype[Any]]",
    "stable_datasets.features.features.Features",
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "stable_datasets.dataset.dataset_dict.DatasetDict",
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "dict[str, pathlib.Path | str]",
    "stable_datasets.features.features.Features",
    "list[str]",
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "dict[str, Any]",
    "stable_datasets.dataset.stable_dataset.StableDataset",
    "dict[str, list[Any]]",
    "Any",
]

# Third-party packages mypy would otherwise analyze at length; they stay opaque, ours is read in full.
CONFIG = """
[mypy]
follow_imports = silent
ignore_missing_imports = True
[mypy-ray.*,torch.*,pyarrow.*,lance.*,cv2.*,boto3.*,botocore.*,datasets.*,pandas.*,sklearn.*,tokenizers.*,loguru.*,tqdm.*,filelock.*,fsspec.*,PIL.*]
follow_imports = skip
"""


def test_py_typed_is_in_the_package():
    assert (ROOT / "stable_datasets" / "py.typed").is_file()


@pytest.mark.timeout(300)
def test_mypy_sees_real_types_in_user_code(tmp_path):
    (tmp_path / "user.py").write_text(textwrap.dedent(SNIPPET))
    (tmp_path / "mypy.ini").write_text(CONFIG)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / ".mypy_cache"),
         "user.py"], capture_output=True, text=True, cwd=tmp_path, env={"MYPYPATH": str(ROOT), "PATH": ""})
    revealed = re.findall(r'Revealed type is "(.*)"', result.stdout)
    assert revealed == EXPECTED, result.stdout
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "user.py:24" in errors[0] and '"select"' in errors[0], result.stdout
