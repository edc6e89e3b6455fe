"""Megatron-Core's own `GPTDataset` and `BlendedDataset` as the oracle of token blocks and blends.

Only `megatron.core.datasets` is imported (its modules need numpy and torch, not the training stack). Their index
builders live in the C++ module `helpers_cpp`: megatron-core's platform wheels ship it compiled; when it is missing
(a source install) `helpers.cpp`, which the package ships, is compiled here with the system C++ compiler and
pybind11 into a temporary folder. Without either, the oracle tests skip and say why.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest


def _compiled_helpers() -> None:
    """Build `megatron.core.datasets.helpers_cpp` from the installed helpers.cpp when the wheel has none."""
    try:
        importlib.import_module("megatron.core.datasets.helpers_cpp")
        return
    except ImportError:
        pass
    spec = importlib.util.find_spec("megatron.core.datasets")
    source = Path(spec.origin).parent / "helpers.cpp"
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None or not source.exists():
        pytest.skip(f"megatron-core ships no compiled helpers_cpp and cannot build one here (C++ compiler: "
                    f"{compiler}, {source} exists: {source.exists()}); apt-get install g++")
    try:
        import pybind11
    except ImportError:
        pytest.skip("megatron-core ships no compiled helpers_cpp; building it needs pybind11 (pip install pybind11)")
    out = Path(tempfile.mkdtemp(prefix="helpers_cpp-")) / ("helpers_cpp" + sysconfig.get_config_var("EXT_SUFFIX"))
    command = [compiler, "-O3", "-Wall", "-shared", "-std=c++11", "-fPIC", f"-I{pybind11.get_include()}",
               f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"compiling {source} failed: {done.stderr[-2000:]}"
    module_spec = importlib.util.spec_from_file_location("megatron.core.datasets.helpers_cpp", out)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    sys.modules["megatron.core.datasets.helpers_cpp"] = module


class Tokenizer:
    """The little of a Megatron tokenizer GPTDataset reads: vocabulary size, EOD, no pad (so pad is -1)."""

    vocab_size = 70_000
    eod = 0
    unique_identifiers = {"class": "Tokenizer"}

    @property
    def pad(self) -> int:
        raise NotImplementedError


def megatron_datasets() -> Any:
    """The modules of megatron.core.datasets the oracle uses, with helpers_cpp importable."""
    pytest.importorskip("megatron.core")
    _compiled_helpers()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import blended_megatron_dataset_builder, gpt_dataset, indexed_dataset, utils
    return type("Megatron", (), {"gpt": gpt_dataset, "builder": blended_megatron_dataset_builder,
                                 "indexed": indexed_dataset, "Split": utils.Split})


def config(m: Any, **options: Any) -> Any:
    """A GPTDatasetConfig with Megatron's defaults for pretraining (no EOD resets or masks, no attention mask)."""
    return m.gpt.GPTDatasetConfig(tokenizer=Tokenizer(), reset_position_ids=False, reset_attention_mask=False,
                                  eod_mask_loss=False, create_attention_mask=False, **options)


def megatron_blending_indices(shares: Any, size: int) -> tuple[Any, Any]:
    """Megatron-Core's own `helpers.build_blending_indices` (its C++ loop, as `BlendedDataset` calls it) on
    normalised `shares`: (dataset_index int16, dataset_sample_index int64)."""
    import numpy as np

    megatron_datasets()
    from megatron.core.datasets import helpers

    dataset_index, dataset_sample_index = np.zeros(size, dtype=np.int16), np.zeros(size, dtype=np.int64)
    helpers.build_blending_indices(dataset_index, dataset_sample_index, np.asarray(shares, dtype=np.float64),
                                   len(shares), size, False)
    return dataset_index, dataset_sample_index
