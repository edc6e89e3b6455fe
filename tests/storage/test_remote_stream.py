"""A remote stream pins the attempt it reads: `rm` and `prune` on its node never pull shards from under it."""

from __future__ import annotations

import gc

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
