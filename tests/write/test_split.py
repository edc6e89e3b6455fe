"""The one write path: a build or a map in parallel parts gives the rows of one process, in order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.cache.builds import published_path
from stable_datasets.errors import ExampleError, StableDatasetsError, WorkerDiedError
from stable_datasets.layouts.open import verify_cache
from tests.conftest import PARTS_BUILDER, SMALL_FILES, TOY_BUILDER


@pytest.mark.parametrize("storage_format", ["arrow", "parquet", "lance"])
def test_parallel_build_has_the_rows_of_one_process(parts_builder, storage_format):
    options = SMALL_FILES[storage_format]
    one = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format, layout_options=options)
    expected = one.to_arrow()
    assert expected.column("part").to_pylist() == [p for p in range(5) for _ in range(300)]
    picked = one[[1499, 0, 777]]
    two = sds.load_dataset(str(parts_builder), split="train", storage_format=storage_format, layout_options=options,
                           num_proc=2, download_mode="force_rebuild")
    # num_proc is not part of the fingerprint: the same cache (a new build of it)
    assert [published_path(d) for d in two.cache_dirs] == [published_path(d) for d in one.cache_dirs]
    assert two.to_arrow().equals(expected)
    assert two[[1499, 0, 777]] == picked
    directory = two.cache_dirs[0]
    assert not [p for p in directory.parent.iterdir() if p.name.startswith(".staging")]
    assert not list(directory.rglob(".part-*")) and not list(directory.rglob("_part.json"))
    assert verify_cache(directory) == []


def test_parallel_arrow_shards_are_renumbered_in_order(parts_builder):
    ds = sds.load_dataset(str(parts_builder), split="train", num_proc=3, layout_options=SMALL_FILES["arrow"])
    meta = json.loads((ds.cache_dirs[0] / "_metadata.json").read_text())
    names = [s["path"] for s in meta["shards"]]
    assert names == [f"shard-{n:05d}.arrow" for n in range(len(names))] and len(names) > 3
    assert sum(s["num_rows"] for s in meta["shards"]) == meta["num_rows"] == 1500
    assert all(s["num_rows"] > 0 for s in meta["shards"])


def test_parallel_lance_build_commits_fragments_once(parts_builder):
    import lance

    ds = sds.load_dataset(str(parts_builder), split="train", storage_format="lance", num_proc=2,
                          layout_options=SMALL_FILES["lance"])
    dataset = lance.dataset(str(ds.cache_dirs[0] / "data.lance"))
    assert dataset.version == 1 and len(dataset.versions()) == 1  # one commit for every part
    assert [f.count_rows() for f in dataset.get_fragments()] == [200, 200, 200, 200, 200, 200, 200, 100]
    assert dataset.to_table(columns=["text"]).column("text").to_pylist()[598:602] == ["1:298", "1:299", "2:0", "2:1"]


def test_duplicate_key_across_parts_is_named(write_builder, cache_root):
    # parts 0-2 go to the first job, 3-4 to the second; part % 3 repeats (0, i) and (1, i) only across jobs
    path = write_builder("parts", PARTS_BUILDER.replace("KEY", "(part % 3, i)"))
    with pytest.raises(ExampleError, match=r"split 'train', example key \[0, 0\]: duplicate example key"):
        sds.load_dataset(str(path), split="train", num_proc=2)
    assert not list(cache_root.rglob("_metadata.json")) and not list(cache_root.rglob(".staging*"))


def test_a_part_written_where_the_driver_cannot_see_it_is_named(parts_builder, cache_root, monkeypatch):
    """Ray workers on other machines write their parts into the staging folder by its path: when that path is
    a local disk (a cache root, or an object-store root's STABLE_DATASETS_LOCAL_CACHE_DIR, that is not shared),
    the driver finds no part folder. Here the engine returns, then part 1's folder is gone, as it would be on
    another machine's disk. Before: a bare FileNotFoundError from the layout's merge, staging kept for a resume
    that cannot help. After: the build names the part, the folder and what must be shared; nothing is kept."""
    import shutil

    from stable_datasets.builder import builder as builder_module
    from stable_datasets.write.engines import JobRunner
    from stable_datasets.write.parts import part_dir

    class OtherMachinesRunner(JobRunner):
        def __call__(self, fn, calls, desc="jobs"):
            results = super().__call__(fn, calls, desc)
            if desc.endswith("part"):
                shutil.rmtree(part_dir(calls[1][5], 1))
            return results

    monkeypatch.setattr(builder_module, "JobRunner", OtherMachinesRunner)
    with pytest.raises(StableDatasetsError) as caught:
        sds.load_dataset(str(parts_builder), split="train", num_proc=2)
    staging = next(cache_root.rglob("parts/default/*/*")) / ".staging-train"
    assert str(caught.value) == (
        f"parts 'train': part 1 of 2 was written where this machine cannot see it (no {staging}/.part-00001): "
        "with engine='ray' on several machines, the cache root must be on storage every node shares (NFS, "
        "Lustre), or on an object store (s3://..., gs://...), through which the parts then travel")
    assert not list(cache_root.rglob("_metadata.json")) and not list(cache_root.rglob(".staging*"))


def test_killed_part_fails_cleanly_and_the_next_build_resumes(parts_builder, cache_root, tmp_path, monkeypatch):
    counter = tmp_path / "generated.txt"
    monkeypatch.setenv("PARTS_COUNTER", str(counter))
    monkeypatch.setenv("PARTS_KILL", "4")  # the second job's worker dies; the first job finishes
    with pytest.raises(WorkerDiedError, match="worker process died .*killed by SIGKILL"):
        sds.load_dataset(str(parts_builder), split="train", num_proc=2)
    assert not list(cache_root.rglob("_metadata.json"))  # nothing published
    staging = next(cache_root.rglob(".staging-train"))
    finished = json.loads((staging / ".part-00000" / "_part.json").read_text())
    assert finished["num_rows"] == 600  # parts 0 and 1; the second job had parts 2, 3 and 4
    assert len(finished["key_counts"]) == 2 and sum(finished["key_counts"]) == 600  # its keys in 2 digest ranges
    assert sorted(p.name for p in (staging / ".part-00000" / "_keys").iterdir()) == ["00000.arrow", "00001.arrow"]
    inode = (staging / ".part-00000" / finished["shards"][0]["path"]).stat().st_ino
    assert sorted(counter.read_text().split()) == ["0", "1", "2", "3"]  # the worker died on part 4

    counter.write_text("")
    monkeypatch.delenv("PARTS_KILL")
    ds = sds.load_dataset(str(parts_builder), split="train", num_proc=2)
    assert counter.read_text().split() == ["2", "3", "4"]  # the finished part was kept, not generated again
    assert (ds.cache_dirs[0] / "shard-00000.arrow").stat().st_ino == inode
    assert ds["part"] == [p for p in range(5) for _ in range(300)]
    assert not staging.exists()


def test_parts_are_rebuilt_when_the_jobs_change(parts_builder, cache_root, tmp_path, monkeypatch):
    monkeypatch.setenv("PARTS_KILL", "4")
    with pytest.raises(WorkerDiedError):
        sds.load_dataset(str(parts_builder), split="train", num_proc=2)
    monkeypatch.delenv("PARTS_KILL")
    counter = tmp_path / "generated.txt"
    monkeypatch.setenv("PARTS_COUNTER", str(counter))
    ds = sds.load_dataset(str(parts_builder), split="train", num_proc=3)  # other jobs: nothing is reused
    assert sorted(counter.read_text().split()) == ["0", "1", "2", "3", "4"]
    assert ds["part"] == [p for p in range(5) for _ in range(300)]


def test_nested_path_videos_restart_instead_of_resuming(write_builder):
    path = write_builder("nested_videos", """
        import stable_datasets as sds

        class NestedVideos(sds.GeneratorBasedBuilder):
            def _info(self):
                return sds.DatasetInfo(features=sds.Features({
                    "clips": sds.Sequence({"video": sds.Video(storage="path"), "start": sds.Value("int32")})}))
    """)
    builder = sds.load_builder(str(path))
    options = builder.layout_options("arrow")
    plan = builder._write_plan("train", builder.cache_dir("arrow", options) / "train", "arrow", options, "fp", {})
    assert plan.resumable is False
    toy = sds.load_builder(str(write_builder("parts", PARTS_BUILDER.replace("KEY", "(part, i)"))))
    assert toy._write_plan("train", toy.cache_dir() / "train", "arrow", toy.layout_options("arrow"), "fp",
                           {}).resumable


def test_engine_and_num_proc_are_checked(parts_builder):
    with pytest.raises(ValueError, match="engine must be one of"):
        sds.load_dataset(str(parts_builder), split="train", engine="threads")
    with pytest.raises(ValueError, match="num_proc must be a positive int"):
        sds.load_dataset(str(parts_builder), split="train", num_proc=0)


def _add_square(row):
    return {"square": row["i"] * row["i"], "tag": f"{row['part']}-{row['i'] % 7}"}


def _batched_repeat(batch):
    return {"i": [i for i in batch["i"] for _ in range(2)], "copy": [c for c in batch["part"] for _ in range(2)]}


def test_map_and_filter_with_num_proc_match_one_process(parts_builder):
    ds = sds.load_dataset(str(parts_builder), split="train")
    one = ds.map(_add_square)
    expected, columns = one.to_arrow(), one.column_names
    two = ds.map(_add_square, num_proc=2, load_from_cache_file=False)
    assert two.to_arrow().equals(expected)
    assert two["square"][:3] == [0, 1, 4] and two.column_names == columns

    grown = ds.map(_batched_repeat, batched=True, batch_size=64, remove_columns=["part", "text", "vec", "blob"],
                   num_proc=2)
    assert len(grown) == 3000 and grown["i"][:4] == [0, 0, 1, 1]
    expected = grown.to_arrow()
    assert ds.map(_batched_repeat, batched=True, batch_size=64, load_from_cache_file=False,
                  remove_columns=["part", "text", "vec", "blob"]).to_arrow().equals(expected)

    kept = ds.filter(lambda row: row["i"] % 97 == 0, num_proc=2)
    assert kept["i"] == ds.filter(lambda row: row["i"] % 97 == 0)["i"] == [0, 97, 194, 291] * 5
    shuffled = ds.shuffle(seed=3)
    assert shuffled.filter(lambda b: np.asarray(b["part"]) == 2, batched=True, batch_size=100, num_proc=2)["i"] == \
        shuffled.filter(lambda b: np.asarray(b["part"]) == 2, batched=True, batch_size=100)["i"]


def test_map_error_in_a_worker_names_the_row(parts_builder):
    ds = sds.load_dataset(str(parts_builder), split="train")

    def bad(row):
        return {"i": "not a number" if row["i"] == 250 and row["part"] == 4 else row["i"]}

    with pytest.raises(ExampleError, match=r"example key 1450, field 'i'.*pass features="):
        ds.map(bad, num_proc=2)


def _chat_files(folder, files=4, per_file=40):
    folder.mkdir()
    paths = []
    for f in range(files):
        path = folder / f"chat-{f}.jsonl"
        with open(path, "w") as fh:
            for r in range(per_file):
                words = " ".join(["word"] * ((f * 37 + r * 11) % 90 + 1))
                fh.write(json.dumps({"prompt": f"question {f}/{r}", "response": words}) + "\n")
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("algorithm", ["first_fit_shuffle", "best_fit_decreasing"])
def test_sft_packs_are_the_same_with_num_proc(tmp_path, algorithm):
    from stable_datasets.sft import PackingConfig

    files = _chat_files(tmp_path / "chats")
    packing = PackingConfig(pack_size=512, algorithm=algorithm, seed=5)
    one = sds.load_dataset("sft", split="train", data_files={"train": files}, packing=packing,
                           storage_format="parquet")
    expected, meta_one = one.to_arrow(), one.cache_metadata[0].extra["pack_metadata"]
    metadata_file = (one.cache_dirs[0] / "512_metadata.jsonl").read_text()
    two = sds.load_dataset("sft", split="train", data_files={"train": files}, packing=packing,
                           storage_format="parquet", num_proc=2, download_mode="force_rebuild")
    assert len(two) == len(expected) > 10
    assert two.to_arrow().equals(expected)
    assert two.cache_metadata[0].extra["pack_metadata"] == meta_one and meta_one["num_sequences"] == 160
    assert (two.cache_dirs[0] / "512_metadata.jsonl").read_text() == metadata_file


def test_python_docs_sft_with_num_proc(cache_root):
    from stable_datasets.sft import PackingConfig

    packing = PackingConfig(pack_size=2048, algorithm="first_fit_decreasing")
    one = sds.load_dataset("python_docs_sft", split="test", packing=packing)
    expected, sequences = one.to_arrow(), one.cache_metadata[0].extra["pack_metadata"]["num_sequences"]
    two = sds.load_dataset("python_docs_sft", split="test", packing=packing, num_proc=2,
                           download_mode="force_rebuild")
    assert two.to_arrow().equals(expected)
    chats = sds.load_dataset("python_docs_sft", split="test", num_proc=2)
    assert len(chats) == sequences


def test_interleaved_builder_with_num_proc(tmp_path):
    from tests.fixtures.mint_shards import write_mint_shards

    shards = write_mint_shards(tmp_path / "tars", num_samples=30, samples_per_shard=8, tiff_every=10)
    data_files = str(shards[0].parent / "*.tar")
    expected = sds.load_dataset("interleaved", split="train", data_files=data_files).to_arrow()
    two = sds.load_dataset("interleaved", split="train", data_files=data_files, num_proc=2,
                           download_mode="force_rebuild")
    assert len(two) == 30 and two.to_arrow().equals(expected)


@pytest.mark.parametrize("storage", ["path", "bytes", "frames"])
def test_moving_digits_with_num_proc(storage):
    small = {"train_videos": 5, "test_videos": 1}
    one = sds.load_dataset("moving_digits", name=storage, split="train", **small)
    windows = [0, len(one) // 2, len(one) - 1]
    expected, videos, rows = one.to_arrow(), one.cache_metadata[0].extra.get("videos"), [one[w] for w in windows]
    two = sds.load_dataset("moving_digits", name=storage, split="train", num_proc=2, download_mode="force_rebuild",
                           **small)
    assert len(two) == len(expected)
    if storage == "frames":
        assert two.cache_metadata[0].extra["videos"] == videos and len(videos) == 5
        for window, a in zip(windows, rows):
            b = two[window]
            assert np.array_equal(a["video"], b["video"]) and a["digits"] == b["digits"]
            assert (a["video_index"], a["start_frame"]) == (b["video_index"], b["start_frame"])
    else:
        assert two.to_arrow().equals(expected)
        if storage == "path":
            assert os.path.exists(two[4]["video"].path)


def test_sys_exit_in_a_forked_part_fails_the_build_naming_the_example(write_builder, cache_root):
    """A generator calling sys.exit (a library's CLI entry point, say) in a worker of num_proc=2. Before, the
    parent re-raised the worker's SystemExit: the user's program ended there with exit status 3 and no message
    at all. Now the build fails with the worker's traceback, which says where the generator stopped."""
    path = write_builder("exits", PARTS_BUILDER.replace("KEY", "(part, i)").replace(
        "            for i in range(rows):\n",
        "            for i in range(rows):\n                if (part, i) == (3, 5):\n"
        "                    import sys\n                    sys.exit(3)\n"))
    with pytest.raises(StableDatasetsError, match=r"'train' part 1 of 2 failed in its worker") as caught:
        sds.load_dataset(str(path), split="train", num_proc=2)
    assert "SystemExit: 3" in str(caught.value)
    assert "raised by builder 'exits' generating split 'train', after example key (3, 4)" in str(caught.value)
    assert not list(cache_root.rglob("_metadata.json")) and not list(cache_root.rglob(".staging*"))


def test_parallel_lance_parts_forked_from_a_lance_user_write_through_a_helper(parts_builder, tmp_path):
    """Lance's runtime does not survive fork: parts forked after the parent used Lance must not use it."""
    script = textwrap.dedent(f"""
        import stable_datasets as sds
        from stable_datasets.layouts.lance import rows as lance_rows
        one = sds.load_dataset({str(parts_builder)!r}, split="train", storage_format="lance")  # Lance in the parent
        expected = one.to_arrow()
        real = lance_rows.Writer._write_through_helper

        def through_helper(self, *args):  # runs in the forked parts: leave a mark the parent can count
            with open({str(tmp_path / "helpers.txt")!r}, "a") as fh:
                fh.write("h")
            return real(self, *args)

        lance_rows.Writer._write_through_helper = through_helper
        two = sds.load_dataset({str(parts_builder)!r}, split="train", storage_format="lance", num_proc=2,
                               download_mode="force_rebuild", layout_options={{"max_rows_per_file": 250}})
        assert two.to_arrow().equals(expected), "rows differ"
        print("ok", len(two))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok", "1500"]
    assert (tmp_path / "helpers.txt").read_text() == "hh"  # both forked parts wrote through a helper process


def test_an_exception_that_does_not_pickle_still_reaches_the_parent(parts_builder):
    class Picky(Exception):
        def __init__(self, a, b):  # pickling rebuilds it with one argument: it cannot cross processes
            super().__init__(f"{a}/{b}")

    def explode(row):
        if row["part"] == 4:
            raise Picky("part", 4)
        return {"x": 1}

    ds = sds.load_dataset(str(parts_builder), split="train")
    with pytest.raises(StableDatasetsError, match=r"(?s)failed in its worker.*Picky: part/4"):
        ds.map(explode, num_proc=2)


@pytest.mark.timeout(60)
def test_a_part_killed_inside_the_progress_lock_does_not_hang_the_parent():
    """A part dies (SIGKILL) while holding tqdm's lock; the parent must still report it, not wait forever."""
    import signal

    import tqdm

    from stable_datasets.write.engines import run_forked

    tqdm.tqdm.get_lock()  # made before the fork, as after any earlier progress bar: its semaphore is shared

    def die_holding_the_lock():
        with tqdm.tqdm.get_lock():
            os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(WorkerDiedError, match="killed by SIGKILL"):
        run_forked(die_holding_the_lock, [(), ()], 2)
    with tqdm.tqdm(range(3), disable=True) as bar:  # would block forever if the lock were still held
        assert list(bar) == [0, 1, 2]


def test_a_split_build_leaves_the_callers_runner_as_it_was(write_builder, tmp_path):
    """The build adds the source's code modules (sent to Ray workers) and a shared work folder to a copy of the
    runner; before, it changed the caller's, which then carried every split's modules into the next."""
    from stable_datasets.builder.builder import BuilderSource
    from stable_datasets.write.engines import JobRunner
    from stable_datasets.write.split import write_split

    builder = sds.load_builder(str(write_builder("toy", TOY_BUILDER)))
    resolved = builder.resolve()
    generators = {g.name: g for g in builder._generators("arrow", resolved.options, None, resolved.directory)}
    runner = JobRunner()
    for split in ("train", "test"):
        plan = builder._write_plan(split, tmp_path / "out" / split, "arrow", resolved.options, resolved.fingerprint,
                                   resolved.inputs, evict=False, layout=resolved.layout)
        assert write_split(plan, BuilderSource(builder, generators[split]), runner).num_rows == 50
        assert runner == JobRunner() and runner.modules == []
