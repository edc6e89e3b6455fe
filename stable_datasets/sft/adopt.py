"""Packed Parquet files with large row groups, adopted once into a cache for random single packs.

A file written the Megatron-Bridge way (about 1,000 packs per row group, no `pack_id`) can only
be read a row group at a time: a random pack decodes a thousand. pyarrow reads no unit smaller
than a row group, and without `pack_id` no page-level query can find a pack. So such files are
adopted, once: their three packed columns are written through the `parquet` loader into an
Arrow cache (fingerprinted by the files' identity, so an edited file is adopted again and an
unchanged one reopens in milliseconds), whose rows are memory-mapped and read one at a time.

`adopt=None` (default) adopts files with no `pack_id` whose row groups average at least
ADOPT_GROUP_ROWS packs; `adopt=True` adopts any Parquet files, `adopt=False` never.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.dataset.open import open_cache
from stable_datasets.loaders import loader_class
from stable_datasets.sft.parquet_pages import PACK_ID

ADOPT_GROUP_ROWS = 512  # row groups this large decode ~10 ms or more per random pack
PACKED_COLUMNS = ["input_ids", "loss_mask", "seq_start_id"]


def wants_adoption(files: list[Path], adopt: bool | None) -> bool:
    """Whether these Parquet files are read through an adopted cache (see the module docstring)."""
    if adopt is not None:
        return bool(adopt)
    import pyarrow.parquet as pq


    rows = groups = 0
    for path in files:
        try:
            metadata = pq.read_metadata(path)
        except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
            return False  # unreadable: the row-group reader says what is wrong with it, naming the file
        if PACK_ID in metadata.schema.to_arrow_schema().names:
            return False
        rows, groups = rows + metadata.num_rows, groups + metadata.num_row_groups
    return groups > 0 and rows / groups >= ADOPT_GROUP_ROWS


def adopted(files: list[Path], cache_dir: str | None = None) -> Any:
    """The cache of the packed columns of `files` (built on first use, reused after), opened."""

    builder = loader_class("parquet")(None, cache_dir=cache_dir, data_files={"train": [str(f) for f in files]},
                                      columns=PACKED_COLUMNS)
    logger.info("packed Parquet {}{}: row groups of ~1,000 packs and no pack_id, so random packs are read from a "
                "cache of them, made once (adopt=False reads the row groups instead)", files[0],
                f" and {len(files) - 1} more" if len(files) > 1 else "")
    return open_cache(builder.prepare(["train"])["train"])
