"""engine="ray" on a real multi-node cluster whose nodes share no disk (tests/ray_cluster.py), against
the S3 server on 127.0.0.1: parts are written on the worker nodes and merged where they are, on the
store (the driver reads their records, never their data: the server's request log says which process
asked for what); a node lost mid-build costs only its part; datasets are read from the store on every node."""

from __future__ import annotations

import re
import threading
import time

import pytest

import stable_datasets as sds
from stable_datasets.errors import WorkerDiedError
from tests.conftest import SMALL_FILES
from tests.ray_cluster import part_nodes, ran_on_worker_nodes
from tests.s3_server import tag_this_process

ray = pytest.importorskip("ray")
pytest.importorskip("moto")
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.cluster]  # one cluster at a time, in one xdist worker



#: a data file of a cache, as named in a part or in the cache (the driver must never download one)
DATA_FILE = re.compile(r"(^|/)(shard-\d+[^/]*\.(arrow|parquet)|data\.lance/data/[^/]+)$")


def _built_on_the_cluster(builder, monkeypatch, s3_requests, s3_env, **prepare):
    """Prepare the train split of `builder` with engine="ray" on the cluster (no open afterwards, which would read
    the shards); check that the driver downloaded no data file (its GETs, by the server's log), had every data
    file of the cache copied on the store instead, and kept none on its disk. The opened dataset."""
    tag_this_process(monkeypatch, "sds-driver")  # the worker nodes' clients send no app id
    mark = s3_requests.mark()
    url = sds.load_builder(str(builder)).prepare("train", engine="ray", num_proc=4, **prepare)["train"]
    driver = s3_requests.since(mark, app="sds-driver")
    assert driver and len(s3_requests.since(mark)) > len(driver)  # the nodes asked too, without the tag
    downloaded = [r.key for r in driver if r.kind == "GET" and DATA_FILE.search(r.key)]
    assert downloaded == []
    assert not [p for p in s3_env.local.rglob("*") if DATA_FILE.search(p.as_posix())]  # nor on its disk
    ds = sds.open_cache(url)
    meta = ds.cache_metadata[0]
    copied = sorted(r.key.split(f"{meta.attempt}/", 1)[1] for r in driver if r.kind == "COPY")
    assert copied == sorted(s.path for s in meta.shards if DATA_FILE.search(s.path)) != []
    return ds


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_parts_written_on_nodes_that_share_no_disk_have_the_rows_of_one_process(cluster, s3_env, s3_requests,
                                                                               parts_builder, tmp_path,
                                                                               monkeypatch, storage_format):
    options = SMALL_FILES[storage_format]
    expected = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format,
                                layout_options=options, cache_dir=str(tmp_path / "one-process")).to_arrow()
    ds = _built_on_the_cluster(parts_builder, monkeypatch, s3_requests, s3_env, storage_format=storage_format,
                               layout_options=options)
    assert ds.to_arrow().equals(expected)
    nodes = part_nodes(ds)
    assert ran_on_worker_nodes(nodes, parts=4)  # on the worker nodes, however Ray spread them
    assert ray.get_runtime_context().get_node_id() not in nodes  # the head has no CPUs
    keys = s3_env.objects()
    assert not [k for k in keys if "/.part-" in k]  # the parts are gone from the store once published
    assert len([k for k in keys if k.endswith("_metadata.json")]) == 1
    if storage_format == "lance":  # blob digests made on the nodes: the blob column reads (and checks) them
        assert set(ds.cache_metadata[0].extra["blob_digests"]) == set(ds.cache_metadata[0].extra["fragment_files"])
        assert ds["blob"] == [bytes([p]) * (i % 5) for p in range(5) for i in range(300)]


def _store_builder(write_builder, bucket: str, name: str):
    """Parts 0..3 of 200 rows; every start of a part leaves an object `events/start-<part>-<node>-<n>` in the
    bucket (`node`: the Ray node it runs on), and a part finds `kill-<part>` there kills its own worker; while
    `hold` is there a started part waits before its rows."""
    return write_builder(name, f"""
        import os, signal, time, uuid
        import boto3
        import ray
        import stable_datasets as sds

        def client():
            return boto3.client("s3", region_name="us-east-1")

        def exists(key):
            return client().list_objects_v2(Bucket={bucket!r}, Prefix=key).get("KeyCount", 0) > 0

        class Nodeparts(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({{"part": sds.Value("int32"), "i": sds.Value("int64")}}))

            def _split_generators(self, dl_manager):
                return [sds.SplitGenerator("train", {{"parts": [0, 1, 2, 3]}})]

            def _generate_examples(self, parts):
                for part in parts:
                    node = ray.get_runtime_context().get_node_id()
                    client().put_object(Bucket={bucket!r}, Key=f"events/start-{{part}}-{{node}}-{{uuid.uuid4().hex}}",
                                        Body=b"")
                    if exists(f"kill-{{part}}"):
                        os.kill(os.getpid(), signal.SIGKILL)
                    while exists("hold"):
                        time.sleep(0.1)
                    for i in range(200):
                        yield (part, i), {{"part": part, "i": i}}
    """)


def _starts(s3_env) -> list[int]:
    return sorted(int(k.split("-")[1]) for k in s3_env.objects("events/"))


def _start_nodes(s3_env) -> list[str]:
    """The Ray node of each start of a part so far."""
    return [k.split("-")[2] for k in s3_env.objects("events/")]


def test_a_part_that_keeps_failing_is_named_and_the_rerun_reuses_the_finished_parts(cluster, s3_env, write_builder):
    path = _store_builder(write_builder, s3_env.bucket, "nodeparts")
    s3_env.write("kill-2", b"")
    with pytest.raises(WorkerDiedError, match=r"'train' part 2 of 4: its Ray worker died"):
        sds.load_dataset(str(path), split="train", engine="ray", num_proc=4)
    assert not [k for k in s3_env.objects() if k.endswith("_metadata.json")]
    records = [k for k in s3_env.objects() if k.endswith("/_part.json")]
    assert sorted(k.rsplit("/", 2)[1] for k in records) == [".part-00000", ".part-00001", ".part-00003"]
    assert _starts(s3_env) == [0, 1, 2, 2, 2, 3]  # part 2 ran three times (two retries)
    s3_env.delete("kill-2")
    ds = sds.load_dataset(str(path), split="train", engine="ray", num_proc=4)
    assert _starts(s3_env) == [0, 1, 2, 2, 2, 2, 3]  # only part 2 ran again
    assert ds["part"] == [p for p in range(4) for _ in range(200)] and ds["i"] == list(range(200)) * 4
    assert not [k for k in s3_env.objects() if "/.part-" in k]


def test_a_worker_node_killed_mid_build_costs_only_its_part(cluster, s3_env, write_builder):
    path = _store_builder(write_builder, s3_env.bucket, "nodekill")
    s3_env.write("hold", b"")  # a started part waits: the node of one is killed while the part runs there
    result: dict = {}

    def build():
        try:
            result["ds"] = sds.load_dataset(str(path), split="train", engine="ray", num_proc=4)
        except BaseException as exc:  # reported below
            result["error"] = exc

    thread = threading.Thread(target=build)
    thread.start()
    deadline = time.monotonic() + 120  # a worker process can take seconds to start on a busy machine
    while not _start_nodes(s3_env) and time.monotonic() < deadline:
        time.sleep(0.1)
    started = _start_nodes(s3_env)
    assert started, "no part started"
    victim = cluster.worker_of(started[0])  # the node of a part that is running (held): not whichever is first
    victim.kill_raylet()
    s3_env.delete("hold")
    thread.join(timeout=240)
    try:
        assert "error" not in result, result.get("error")
        ds = result["ds"]
        assert ds["part"] == [p for p in range(4) for _ in range(200)] and ds["i"] == list(range(200)) * 4
        assert ran_on_worker_nodes(part_nodes(ds)) and len(_starts(s3_env)) >= 5  # a part ran again after the loss
        assert not [k for k in s3_env.objects() if "/.part-" in k]
    finally:  # the next test has two worker nodes again
        cluster.workers.remove(victim)
        victim.process.kill()
        cluster.add_worker()
        cluster.wait_for_workers(2)


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_to_ray_reads_a_cache_in_object_storage_on_every_node(cluster, s3_env, parts_builder, storage_format):
    ds = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format,
                          layout_options=SMALL_FILES[storage_format])
    rows = ds.to_ray().take_all()
    assert sorted((r["part"], r["i"], r["text"]) for r in rows) == list(zip(ds["part"], ds["i"], ds["text"]))


def test_files_a_plan_step_writes_reach_every_node_through_the_store(cluster, s3_env, write_builder, tmp_path):
    """A global step before the parts (`_plan_split`, as the packed `sft` builders tokenize each job into a
    file of the work folder, pack on the driver, then every part reads every token file): with nodes that
    share no disk the work folder is mirrored through the store."""
    path = write_builder("planned", """
        import json
        from pathlib import Path
        import stable_datasets as sds
        from stable_datasets.write import SplitJobs

        class Planned(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({"job": sds.Value("int32"), "n": sds.Value("int64"),
                                                              "total": sds.Value("int64")}))

            def _split_generators(self, dl_manager):
                return [sds.SplitGenerator("train", {"jobs": [0, 1, 2, 3]})]

            def _numbers(self, job, path):
                Path(path).write_text(json.dumps(list(range(job * 10, job * 10 + 10))))

            def _plan_split(self, generator, num_jobs, run, workdir):
                jobs = generator.gen_kwargs["jobs"]
                paths = [str(workdir / f"numbers-{j}.json") for j in jobs]
                run(self._numbers, list(zip(jobs, paths)), desc="numbers")
                total = sum(n for p in paths for n in json.loads(Path(p).read_text()))  # the driver reads them all
                return SplitJobs([{"paths": paths, "job": j, "total": total} for j in jobs])

            def _generate_examples(self, paths, job, total):
                numbers = [n for p in paths for n in json.loads(Path(p).read_text())]  # so does every part
                for n in numbers[job::4]:
                    yield (job, n), {"job": job, "n": n, "total": total}
    """)
    one = sds.load_dataset(str(path), split="train", cache_dir=str(tmp_path / "one-process"))
    ds = sds.load_dataset(str(path), split="train", engine="ray", num_proc=4)
    assert ds.to_arrow().equals(one.to_arrow())
    assert ds["total"] == [780] * 40 and ds["n"][:3] == [0, 4, 8]
    assert ran_on_worker_nodes(part_nodes(ds))
    assert not [k for k in s3_env.objects() if "/.part-" in k or "/work/" in k]


def _rows_of(stream) -> tuple[str, list[tuple[int, int]]]:
    return ray.get_runtime_context().get_node_id(), [(r["part"], r["i"]) for r in stream]


@pytest.mark.parametrize("storage_format", ["arrow", "lance"])
def test_a_stream_of_a_remote_cache_is_read_from_the_store_on_each_node(cluster, s3_env, parts_builder,
                                                                         storage_format):
    ds = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format,
                          layout_options=SMALL_FILES[storage_format])
    stream = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format,
                              layout_options=SMALL_FILES[storage_format], streaming=True)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # one task pinned to each worker node: "SPREAD" is only a preference (with a node's worker slow to start on a
    # busy machine, the other node may run both), and no test depends on how Ray places tasks
    workers = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0)
    reads = [ray.remote(num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))(_rows_of)
             for node in workers]
    results = ray.get([read.remote(stream) for read in reads])  # the whole stream, on each worker node
    assert len(workers) == 2 and [node for node, _ in results] == workers
    for _, rows in results:
        assert rows == list(zip(ds["part"], ds["i"]))


def test_video_frames_written_on_nodes_that_share_no_disk_have_the_rows_of_one_process(cluster, s3_env, s3_requests,
                                                                                       write_builder, tmp_path,
                                                                                       monkeypatch):
    """The Lance frame layout (`Video(storage="frames")`): each part encodes its videos' frames on its node (the
    videos are made there, as inputs every node reaches), the driver commits every part's fragments once."""
    path = write_builder("clips", """
        import os, tempfile
        import cv2
        import numpy as np
        import stable_datasets as sds

        class Clips(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({"video": sds.Video(storage="frames"),
                                                              "clip": sds.Value("int32")}))

            def _split_generators(self, dl_manager):
                return [sds.SplitGenerator("train", {"clips": [0, 1, 2, 3]})]

            def _generate_examples(self, clips):
                folder = tempfile.mkdtemp()
                for clip in clips:
                    path = os.path.join(folder, f"clip-{clip}.mp4")
                    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), 10, (48, 32), True)
                    for t in range(6 + clip):
                        frame = np.zeros((32, 48, 3), np.uint8)
                        frame[2 * t:2 * t + 6, 4 * clip:4 * clip + 6] = 255
                        writer.write(frame)
                    writer.release()
                    yield clip, {"video": path, "clip": clip}
    """)
    one = sds.load_dataset(str(path), split="train", cache_dir=str(tmp_path / "one-process"))
    ds = _built_on_the_cluster(path, monkeypatch, s3_requests, s3_env)
    assert ds.cache_metadata[0].layout == "lance_video_frames"
    assert ds.to_arrow().equals(one.to_arrow())
    assert [v["frames"] for v in ds.cache_metadata[0].extra["videos"]] == [6, 7, 8, 9]
    assert ran_on_worker_nodes(part_nodes(ds))
