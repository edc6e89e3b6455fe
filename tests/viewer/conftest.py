"""A cache root holding one cache of each kind the viewer draws: images, videos (stored files and
frame windows), packed SFT packs and interleaved documents. Built once per test session."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.viewer import serve_in_thread


def _build(root: Path, work: Path) -> dict[str, sds.StableDataset]:
    from stable_datasets.sft import PackingConfig

    made = {"digits": sds.load_dataset("digits", split="train", cache_dir=root)}
    made["video"] = sds.load_dataset("moving_digits", name="path", split="train", cache_dir=root, train_videos=4,
                                     test_videos=1)
    made["frames"] = sds.load_dataset("moving_digits", name="frames", split="train", cache_dir=root, train_videos=3,
                                      test_videos=1)
    chat = work / "chat.jsonl"
    chat.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"What is {i} + {i}?"},
                                                       {"role": "assistant", "content": f"It is {2 * i}."}]})
                              for i in range(40)))
    made["packs"] = sds.load_dataset("sft", split="train", data_files=str(chat), storage_format="parquet",
                                     cache_dir=root, packing=PackingConfig(pack_size=256, algorithm="first_fit"))
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 255, (24, 32, 3), dtype=np.uint8) for _ in range(4)]
    made["docs"] = sds.StableDataset.from_dict(
        {"sample_id": ["a", "b"], "texts": [["First paragraph.", None, "Last words."], [None, "Only text."]],
         "images": [[None, images[0], None], [images[1], None]], "metadata": ["{}", "{}"]},
        features=sds.Features({"sample_id": sds.Value("string"), "texts": sds.Sequence(sds.Value("string")),
                               "images": sds.Sequence(sds.Image()), "metadata": sds.Value("string")}),
        cache_dir=root)
    return made


@pytest.fixture(scope="session")
def viewer_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, sds.StableDataset]]:
    work = tmp_path_factory.mktemp("viewer")
    root = work / "cache"
    return root, _build(root, work)


@pytest.fixture(scope="session")
def viewer(viewer_root):
    """(base URL, root, datasets) of a viewer serving the root on a free port."""
    root, made = viewer_root
    server, url = serve_in_thread(root)
    yield url, root, made
    server.shutdown()
    server.server_close()
