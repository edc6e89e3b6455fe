"""`stable-datasets megatron-preprocess`: Megatron-LM's preprocess_data.py (docs/megatron.md)."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from stable_datasets.cli.common import OK
from stable_datasets.load import load_dataset
from stable_datasets.megatron.preprocess import add_preprocess_arguments, run_preprocess


def cmd_megatron_preprocess(args: argparse.Namespace) -> int:
    """Logic in megatron/preprocess.py; the input is resolved with load_dataset (this floor's)."""
    for prefix in run_preprocess(args, functools.partial(load_dataset, cache_dir=args.cache_dir)):
        print(f"{prefix}.bin {prefix}.idx")
    return OK


def add_commands(sub: Any, common: list[argparse.ArgumentParser]) -> None:
    megatron = sub.add_parser("megatron-preprocess", parents=common, help="Megatron-LM's preprocess_data.py: text "
                                                                          "-> {prefix}_{key}_document.bin/.idx")
    add_preprocess_arguments(megatron)
    megatron.set_defaults(func=cmd_megatron_preprocess)
