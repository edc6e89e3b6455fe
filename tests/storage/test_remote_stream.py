"""A remote stream pins the attempt it reads: `rm` and `prune` on its node never pull shards from under it."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.cli import main as cli_main

pytest.importorskip("boto3")
pytestmark = pytest.mark.timeout(120)

OPTIONS = {"max_shard_size": 100_000}
ROWS = 4000


@pytest.mark.parametrize("command", ["rm", "prune"])
def test_rm_or_prune_while_a_stream_reads_leaves_it_every_shard(s3_env, toy_builder, monkeypatch, tmp_path, capsys,
                                                                command):
    """The stream has read its first shard when the cache is removed (`rm`), or becomes stale (its builder script
    changed) and is pruned: it still serves every row of the epoch; once it is gone, prune removes the attempt."""
    built = sds.load_dataset(str(toy_builder), split="train", layout_options=OPTIONS, rows=ROWS)
    shards = built.cache_metadata[0].shards
    del built
    assert len(shards) >= 3
    gc.collect()
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / "fresh-node"))
    stream = sds.load_dataset(str(toy_builder), split="train", streaming=True, layout_options=OPTIONS,
                              rows=ROWS)
    source = stream.dataset.backends[0]
    url, attempt = source.split.url, source.metadata.attempt
    rows = iter(stream)
    seen = [next(rows)["id"]]
    assert source.downloads < len(shards)
    if command == "rm":
        assert cli_main(["rm", url]) == 0
    else:
        toy_builder.write_text(toy_builder.read_text() + "\n# edited: the published cache is stale now\n")
        assert cli_main(["prune", "--max-staging-age", "0"]) == 0
        assert f"removed stale cache: {url}" in capsys.readouterr().out
    capsys.readouterr()
    assert not [k for k in s3_env.objects() if k.endswith("/_metadata.json")]
    assert [k for k in s3_env.objects() if f"/{attempt}/" in k and k.endswith("/_superseded.json")]
    assert cli_main(["prune", "--max-staging-age", "0"]) == 0  # grace over: only the stream's pin protects it
    assert "superseded attempt" not in capsys.readouterr().out
    seen += [row["id"] for row in rows]
    assert seen == list(range(ROWS)) and source.downloads == len(shards)
    del stream, source, rows
    gc.collect()
    assert cli_main(["prune", "--max-staging-age", "0"]) == 0
    assert "removed superseded attempt" in capsys.readouterr().out
    assert not [k for k in s3_env.objects() if f"/{attempt}/" in k]


SMALL_SHARDS = {"max_shard_size": 40_000}  # about 8 shards


@pytest.mark.parametrize("shuffle", [False, True])
def test_two_nodes_each_download_only_the_shards_of_their_lanes(s3_env, toy_builder, monkeypatch, tmp_path, shuffle):
    """Two nodes (ranks of 2, each its own local shard cache) stream one remote split: each downloads exactly
    the shards its lane of the epoch order covers (one shared at most, where the lanes meet), not every shard."""
    built = sds.load_dataset(str(toy_builder), split="train", layout_options=SMALL_SHARDS, rows=ROWS)
    shards = built.cache_metadata[0].shards
    del built
    gc.collect()
    assert len(shards) >= 4
    starts = np.cumsum([0] + [s.num_rows for s in shards])

    def node(rank: int, lanes: bool = True):
        monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(tmp_path / f"node-{rank}-{lanes}"))
        opened = sds.load_dataset(str(toy_builder), split="train", streaming=True, layout_options=SMALL_SHARDS,
                                  rows=ROWS)
        stream = opened.dataset.to_iterable(rank=rank, world_size=2, lanes=lanes)
        return stream.shuffle(seed=5, window_shards=1) if shuffle else stream

    seen, fetched = [], []
    for rank in range(2):
        stream = node(rank)
        seen += [row["id"] for row in stream]
        lane = np.searchsorted(starts, stream.rank_order(epoch=0), side="right") - 1
        on_disk = {p.name for p in (tmp_path / f"node-{rank}-True").rglob("shard-*") if p.is_file()}
        assert on_disk == {shards[i].path.rsplit("/", 1)[-1] for i in set(lane.tolist())}
        assert stream.dataset.backends[0].downloads == len(set(lane.tolist()))
        fetched.append(set(lane.tolist()))
    assert sorted(seen) == list(range(ROWS))
    assert fetched[0] | fetched[1] == set(range(len(shards))) and len(fetched[0] & fetched[1]) <= 1
    if not shuffle:
        assert max(fetched[0]) <= min(fetched[1])  # node 0 the first half of the split, node 1 the second
    striped = node(0, lanes=False)
    assert len([row["id"] for row in striped]) == ROWS // 2
    assert striped.dataset.backends[0].downloads == len(shards)  # row stripes: every node downloads every shard
