"""engine="ray" on a real multi-node cluster whose nodes share no disk (tests/ray_cluster.py), against the S3
server on 127.0.0.1: data files on the store are read by the parts on their own nodes (the driver reads none),
a map of a cache on the store runs on the nodes and is published there; a node that cannot reach the store, or
cannot import stable-datasets, fails the build naming the part and the node, and nothing is published."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.download.inputs import inputs_root
from stable_datasets.errors import ExampleError, StableDatasetsError
from stable_datasets.loaders import base as loaders_base
from stable_datasets.storage.s3 import S3Store
from tests.http_server import FileServer
from tests.ray_cluster import import_folders, part_nodes, ran_on_worker_nodes

ray = pytest.importorskip("ray")
pytest.importorskip("moto")
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.cluster]  # one cluster at a time, in one xdist worker

FEATURES = sds.Features({"i": sds.Value("int64"), "text": sds.Value("string")})


def _copies() -> list[str]:
    root = inputs_root()
    return sorted(p.name for p in root.rglob("*.jsonl")) if root.is_dir() else []


def test_jsonl_on_s3_is_read_by_the_parts_on_their_nodes_and_equals_a_one_process_build(cluster, s3_env, tmp_path):
    for number in range(4):
        rows = range(number * 10, number * 10 + 10 + number)
        s3_env.write(f"jsonl/part-{number}.jsonl",
                     "".join(json.dumps({"i": i, "text": f"row {i}"}) + "\n" for i in rows).encode())
    pattern = f"s3://{s3_env.bucket}/jsonl/*.jsonl"
    ds = sds.load_dataset("json", data_files=pattern, split="train", features=FEATURES, engine="ray", num_proc=4)
    nodes = part_nodes(ds)
    assert ran_on_worker_nodes(nodes, parts=4)  # on the worker nodes, however Ray spread them
    assert _copies() == []  # the driver planned from the files' sizes: it downloaded none of them
    one = sds.load_dataset("json", data_files=pattern, split="train", features=FEATURES,
                           cache_dir=str(tmp_path / "one-process"))
    assert ds.to_arrow().equals(one.to_arrow())
    assert ds["i"] == [i for n in range(4) for i in range(n * 10, n * 10 + 10 + n)]
    assert not [k for k in s3_env.objects() if "/.part-" in k]  # the parts are removed once published


def test_packed_sft_from_s3_tokenizes_on_the_nodes_and_equals_a_one_process_build(cluster, s3_env, tmp_path):
    """The `sft` builder's plan step (a tokenize task per job, on the nodes) reads the remote chats there too."""
    from stable_datasets.sft import PackingConfig

    urls = []
    for f in range(4):
        lines = [json.dumps({"prompt": f"question {f}/{r}", "response": "word " * ((f * 37 + r * 11) % 40 + 1)})
                 for r in range(15)]
        s3_env.write(f"chats/chat-{f}.jsonl", ("\n".join(lines) + "\n").encode())
        urls.append(f"s3://{s3_env.bucket}/chats/chat-{f}.jsonl")
    packing = PackingConfig(pack_size=256, seed=3)
    ds = sds.load_dataset("sft", split="train", data_files={"train": urls}, packing=packing,
                          storage_format="parquet", engine="ray", num_proc=4)
    assert ran_on_worker_nodes(part_nodes(ds))
    one = sds.load_dataset("sft", split="train", data_files={"train": urls}, packing=packing,
                           storage_format="parquet", cache_dir=str(tmp_path / "one-process"))
    assert len(ds) == len(one) > 3
    assert ds.to_arrow().equals(one.to_arrow())


def _double(batch):
    return {"twice": [2 * i for i in batch["i"]]}


def test_a_map_of_a_cache_on_the_store_runs_on_the_nodes_and_is_published_there(cluster, s3_env, parts_builder):
    source = sds.load_dataset(str(parts_builder), split="train")
    expected = source.map(_double, batched=True, batch_size=50, num_proc=1)  # one process, a local result
    mapped = source.map(_double, batched=True, batch_size=50, num_proc=4, engine="ray")
    assert mapped.to_arrow().equals(expected.to_arrow())
    nodes = part_nodes(mapped)
    assert ran_on_worker_nodes(nodes, parts=4)
    published = [k for k in s3_env.objects() if k.endswith("_metadata.json")]
    assert len(published) == 2 and any(".map-" in k for k in published)  # the source and the map's result
    assert not [k for k in s3_env.objects() if "/.part-" in k]
    again = source.map(_double, batched=True, batch_size=50, num_proc=4, engine="ray")  # published: reused
    assert again.cache_metadata[0].attempt == mapped.cache_metadata[0].attempt


@pytest.fixture
def odd_node(cluster):
    """Adds a third worker node unlike the others (`add(env=..., hide=...)` returns its Ray node id), and holds the
    CPU of each other node with an actor pinned there, so that every task of the build runs on it. The holders
    have answered before `add` returns: an actor that answers runs, and keeps its node's one CPU until killed
    (free CPU counted by Ray does not say whose task holds it). After the test the holders are killed and the
    node removed, so the module's cluster has its two nodes again."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class Holder:  # defined in a function, so Ray sends it by value: the nodes need not import the tests
        def ready(self) -> bool:
            return True

    added, holders = [], []

    def add(**kwargs) -> str:
        others = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0}
        added.append(cluster.add_worker(resources={"odd_node": 1}, **kwargs))
        cluster.wait_for_workers(3)
        for node in others:
            holders.append(ray.remote(num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(
                node, soft=False))(Holder).remote())
        assert ray.get([holder.ready.remote() for holder in holders]) == [True] * len(others)
        return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("odd_node"))

    yield add
    for holder in holders:
        ray.kill(holder)
    for node in added:
        cluster.remove_worker(node)


def _nothing_published(s3_env) -> bool:
    keys = s3_env.objects()
    return not [k for k in keys if k.endswith("_metadata.json") or "/.part-" in k]


def test_a_node_that_cannot_reach_the_store_fails_its_part_naming_part_and_node(cluster, s3_env, parts_builder,
                                                                               odd_node):
    node = odd_node(env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})  # the driver reaches the store, it does not
    with pytest.raises(StableDatasetsError, match=rf"part \d of 5 \(node {node}\): could not .* s3://{s3_env.bucket}/"
                                                  r".*cannot reach the endpoint http://127.0.0.1:9"):
        sds.load_dataset(str(parts_builder), split="train", engine="ray", num_proc=5)
    assert _nothing_published(s3_env)


def test_a_node_without_the_package_fails_its_part_naming_part_and_node(cluster, s3_env, parts_builder, odd_node):
    odd_node(hide=import_folders("stable_datasets"))  # stable_datasets cannot be imported there, from any checkout
    with pytest.raises(StableDatasetsError, match=r"^parts 'train' part \d of 5: its Ray worker on \S+ "
                                                  r"\(pid \d+\) cannot import stable_datasets[\w.]*: install "
                                                  r"stable-datasets \(.*, as on the driver\) on every node"):
        sds.load_dataset(str(parts_builder), split="train", engine="ray", num_proc=5)
    assert _nothing_published(s3_env)


def test_a_ray_address_nobody_answers_fails_at_once_and_leaves_nothing_on_the_store(s3_env, parts_builder):
    """The object-store root's protocol (a lease, parts through the store) starts before Ray is reached: the
    error names the address and the store keeps no lease, part or commit (a subprocess: this one is connected
    to the module's cluster)."""
    script = textwrap.dedent(f"""
        import stable_datasets as sds
        from stable_datasets.errors import StableDatasetsError
        try:
            sds.load_dataset({str(parts_builder)!r}, split="train", num_proc=2, engine="ray",
                             ray_address="127.0.0.1:1")
        except StableDatasetsError as exc:
            print(exc)
    """)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.startswith("cannot reach the Ray cluster at 127.0.0.1:1 (ray_address): "), out.stderr[-3000:]
    assert [k.rsplit("/", 1)[1] for k in s3_env.objects()] == [".splits.json"]  # the split names, nothing else


KEYED_BUILDER = """
import stable_datasets as sds

class Keyed(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"part": sds.Value("int32"), "i": sds.Value("int64")}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"parts": list(range(4))})]

    def _generate_examples(self, parts):
        for part in parts:
            for i in range(200):
                yield KEY, {"part": part, "i": i}
"""


@pytest.fixture
def driver_reads(monkeypatch) -> list[str]:
    """The keys of every object this process (the driver) reads from the store: a counting S3 store (the real one,
    on the S3 server, with each read recorded; the Ray workers on the nodes are other processes)."""
    keys: list[str] = []

    def counting(read):
        def counted(self, key, *args, **kwargs):
            keys.append(key)
            return read(self, key, *args, **kwargs)

        return counted

    for name in ("get", "get_tagged", "download"):
        monkeypatch.setattr(S3Store, name, counting(getattr(S3Store, name)))
    return keys


def test_a_duplicate_across_parts_on_two_nodes_is_named_by_range_jobs_the_driver_reads_no_key_file(
        cluster, s3_env, write_builder, driver_reads):
    """The duplicate-key check runs as range jobs on the nodes, each fetching its range's key files from the store:
    the key is named as one merge names it (the first repeat in build order), nothing is published, and the
    driver read no key file (it read the parts' other files)."""
    fine = sds.load_dataset(str(write_builder("keyed", KEYED_BUILDER.replace("KEY", 'f"{part}-{i}"'))),
                            split="train", engine="ray", num_proc=4)
    assert len(fine) == 800 and ran_on_worker_nodes(part_nodes(fine))
    assert driver_reads and not [k for k in driver_reads if "/_keys/" in k or k.endswith("_keys.arrow")]
    driver_reads.clear()
    twice = write_builder("twice", KEYED_BUILDER.replace("KEY", '"same" if i == 150 and part else f"{part}-{i}"'))
    with pytest.raises(ExampleError, match=r"^builder 'twice', split 'train', example key 'same': duplicate example "
                                           r"key within the split$"):
        sds.load_dataset(str(twice), split="train", engine="ray", num_proc=4)
    assert not [k for k in driver_reads if "/_keys/" in k or k.endswith("_keys.arrow")]
    left = [k for k in s3_env.objects() if "/twice/" in k]
    assert not [k for k in left if k.endswith("_metadata.json") or "/.part-" in k], left  # nothing published


def _big_jsonl(rows: int) -> bytes:
    return "".join(json.dumps({"i": i, "text": f"row {i} " + "x" * (i % 37)}) + "\n" for i in rows).encode()


def _driver_inputs() -> list[Path]:
    root = inputs_root()
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def test_one_large_jsonl_on_s3_is_split_in_ranges_read_on_both_nodes(cluster, s3_env, tmp_path, monkeypatch):
    monkeypatch.setattr(loaders_base, "MIN_RANGE_BYTES", 64 << 10)  # the driver plans: ranges of >= 64 KiB here
    data = _big_jsonl(range(8000))  # ~400 KB
    s3_env.write("big/one.jsonl", data)
    url = f"s3://{s3_env.bucket}/big/one.jsonl"
    ds = sds.load_dataset("json", data_files=url, split="train", features=FEATURES, engine="ray", num_proc=4)
    nodes = part_nodes(ds)
    assert ran_on_worker_nodes(nodes, parts=4)  # four ranges, on the worker nodes
    assert _driver_inputs() == []  # the driver read the cuts' small windows, and copied nothing
    one = sds.load_dataset("json", data_files=url, split="train", features=FEATURES,
                           cache_dir=str(tmp_path / "one-process"))
    assert ds.to_arrow().equals(one.to_arrow()) and ds["i"] == list(range(8000))


def test_an_http_data_file_is_fetched_by_the_parts_on_their_nodes_not_by_the_driver(cluster, s3_env, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setattr(loaders_base, "MIN_RANGE_BYTES", 64 << 10)
    data = _big_jsonl(range(8000))
    with FileServer() as served:
        served.files["/one.jsonl"] = data
        served.validators["/one.jsonl"] = {"ETag": '"v1"'}
        url = f"{served.url}/one.jsonl"
        ds = sds.load_dataset("json", data_files=url, split="train", features=FEATURES, engine="ray", num_proc=4)
        assert None not in [r for _, r in served.requests]  # ranges only, never the whole file
    nodes = part_nodes(ds)
    assert ran_on_worker_nodes(nodes, parts=4)
    assert _driver_inputs() == []  # the driver planned from a HEAD and the cuts' windows
    local = tmp_path / "one.jsonl"
    local.write_bytes(data)
    one = sds.load_dataset("json", data_files=str(local), split="train", features=FEATURES,
                           cache_dir=str(tmp_path / "one-process"))
    assert ds.to_arrow().equals(one.to_arrow())
