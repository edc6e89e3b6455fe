"""`load_dataset(<loader>, data_files=..., streaming=True)` reads the files where they lie: no cache is built,
rows equal the built cache's in order, ranks and workers share every row once, and a resume is exact, also on
another world size; a file changed since a state was saved is refused naming it."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import tarfile
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stable_datasets as sds
from stable_datasets.loaders.columns import LoaderError
from stable_datasets.loaders.webdataset_files import count_samples

torch = pytest.importorskip("torch")
from stable_datasets.loaders import file_stream  # noqa: E402
from stable_datasets.streaming import StreamingDataLoader  # noqa: E402
from stable_datasets.streaming import state as stream_state  # noqa: E402
from stable_datasets.streaming.order import Lanes  # noqa: E402

FILES, PER_FILE = 5, 23  # 115 rows, files of unequal blocks across ranks


def _records(f: int) -> list[dict]:
    return [{"idx": f * PER_FILE + i, "text": f"row {f}-{i}", "score": float(i) / 4} for i in range(PER_FILE)]


def write_files(folder, fmt: str) -> list[str]:
    """FILES data files of `fmt` holding ids 0..FILES*PER_FILE-1 in order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(FILES):
        records = _records(f)
        table = pa.Table.from_pylist(records)
        if fmt == "json":
            path = folder / f"part-{f}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" + ("\n" if i == 3 else "") for i, r in enumerate(records)))
        elif fmt == "jsonl.gz":
            path = folder / f"part-{f}.jsonl.gz"
            path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
        elif fmt == "jsonl.zst":
            path = folder / f"part-{f}.jsonl.zst"
            with pa.CompressedOutputStream(str(path), "zstd") as out:
                out.write("".join(json.dumps(r) + "\n" for r in records).encode())
        elif fmt == "csv":
            path = folder / f"part-{f}.csv"
            lines = ["idx,text,score"] + [f'{r["idx"]},"{r["text"]}",{r["score"]}' for r in records]
            path.write_text("\n".join(lines) + "\n")
        elif fmt == "parquet":
            path = folder / f"part-{f}.parquet"
            pq.write_table(table, path, row_group_size=7)
        elif fmt == "arrow":
            path = folder / f"part-{f}.arrow"
            with pa.ipc.new_file(str(path), table.schema) as writer:
                for batch in table.to_batches(max_chunksize=10):
                    writer.write_batch(batch)
        elif fmt == "text":
            path = folder / f"part-{f}.txt"
            path.write_text("".join(f"{r['idx']} {r['text']}\n" for r in records))
        elif fmt == "webdataset":
            path = folder / f"part-{f}.tar"
            with tarfile.open(path, "w") as tar:
                for r in records:
                    for ext, data in (("idx.json", json.dumps(r["idx"]).encode()), ("txt", r["text"].encode())):
                        info = tarfile.TarInfo(f"s{r['idx']:05d}.{ext}")
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
        else:
            raise AssertionError(fmt)
        paths.append(str(path))
    return paths


def on_rank(stream, **options):
    """The same file stream on another rank / world size (what torch.distributed or RANK/WORLD_SIZE choose)."""
    return stream.dataset.to_iterable(window_shards=file_stream.WINDOW_UNITS, lanes=True, **options)


LOADER = {"json": "json", "jsonl.gz": "json", "jsonl.zst": "json",
          "csv": "csv", "parquet": "parquet", "arrow": "arrow", "text": "text",
          "webdataset": "webdataset"}


def row_id(fmt: str, row: dict) -> int:
    if fmt == "text":
        return int(row["text"].split()[0])
    if fmt == "webdataset":
        return int(row["idx.json"])
    return int(row["idx"])


def nothing_under(root) -> bool:
    return not root.exists() or not any(root.rglob("*"))


@pytest.mark.parametrize("fmt", list(LOADER))
def test_rows_equal_the_built_cache_and_no_cache_is_built(tmp_path, cache_root, fmt):
    files = write_files(tmp_path / "data", fmt)
    stream = sds.load_dataset(LOADER[fmt], data_files=files, split="train", streaming=True)
    assert stream.source_files() is not None
    streamed = list(stream)
    assert not list(cache_root.rglob("_metadata.json"))  # no cache
    if not fmt.startswith("jsonl."):  # a compressed file is decompressed once into the downloads folder
        assert nothing_under(cache_root), sorted(cache_root.rglob("*"))
    built = sds.load_dataset(LOADER[fmt], data_files=files, split="train")
    assert streamed == built.to_list()
    assert [row_id(fmt, r) for r in streamed] == list(range(FILES * PER_FILE))
    assert stream.features == built.features and stream.column_names == built.column_names


def test_a_split_dict_streams_each_split_and_a_slice_cuts_it(tmp_path, cache_root):
    files = write_files(tmp_path / "data", "json")
    streams = sds.load_dataset("json", data_files={"train": files[:3], "test": files[3:]}, streaming=True)
    assert sorted(streams) == ["test", "train"]
    assert [r["idx"] for r in streams["test"]] == list(range(3 * PER_FILE, FILES * PER_FILE))
    sliced = sds.load_dataset("json", data_files=files, split="train[10:20]", streaming=True)
    assert [r["idx"] for r in sliced] == list(range(10, 20))
    assert nothing_under(cache_root)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_ranks_and_workers_serve_every_row_once(tmp_path, fmt):
    files = write_files(tmp_path / "data", fmt)
    seen: Counter = Counter()
    for rank in range(3):
        stream = sds.load_dataset(LOADER[fmt], data_files=files, split="train", streaming=True)
        stream = on_rank(stream, rank=rank, world_size=3, drop_last=True).shuffle(seed=3, buffer_size=16)
        for batch in StreamingDataLoader(stream, batch_size=4, num_workers=2):
            seen.update(int(i) for i in batch["idx"])
    total = FILES * PER_FILE
    assert set(seen.values()) == {1} and len(seen) == total - total % 3  # 115 rows on 3 ranks: 1 dropped


def test_verbs_work_on_a_file_stream(tmp_path):
    files = write_files(tmp_path / "data", "json")
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    assert [r["idx"] for r in stream.take(3)] == [0, 1, 2]
    assert [r["idx"] for r in stream.skip(110)] == [110, 111, 112, 113, 114]
    assert [r["idx"] for r in stream.filter(lambda r: r["idx"] % 50 == 0)] == [0, 50, 100]
    assert [r["idx"] for r in stream.take(2).map(lambda r: {"idx": r["idx"] * 2})] == [0, 2]
    batches = list(stream.batch(50))
    assert [len(b["idx"]) for b in batches] == [50, 50, 15]
    shuffled = [r["idx"] for r in stream.shuffle(seed=1, buffer_size=10)]
    assert sorted(shuffled) == list(range(115)) and shuffled != list(range(115))
    assert shuffled == [r["idx"] for r in stream.shuffle(seed=1, buffer_size=10)]
    first = next(iter(stream.with_format("numpy")))
    assert isinstance(first["score"], np.floating | float) and first["text"] == "row 0-0"
    stream.set_epoch(3)
    assert stream.epoch == 3
    mixed = sds.interleave_datasets([stream.take(3), stream.skip(112)])
    assert [r["idx"] for r in mixed] == [0, 112, 1, 113, 2]  # HF's streams stop when the first source runs out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.integers(0, 9), min_size=1, max_size=5), n=st.integers(1, 3), m=st.integers(1, 3),
       stop=st.integers(0, 40), seed=st.integers(0, 3), shuffle=st.booleans())
def test_resume_is_exact_on_another_world_size(tmp_path_factory, rows, n, m, stop, seed, shuffle):
    folder = tmp_path_factory.mktemp("resume")
    files, ident = [], 0
    for f, count in enumerate(rows):
        path = folder / f"f{f}.jsonl"
        path.write_text("".join(json.dumps({"idx": ident + i}) + "\n" for i in range(count)))
        ident += count
        files.append(str(path))
    total = sum(rows)

    def stream(rank, world):
        opened = sds.load_dataset("json", data_files=files, split="train", streaming=True,
                                  features=sds.Features({"idx": sds.Value("int64")}))
        opened = on_rank(opened, rank=rank, world_size=world, drop_last=True)
        return opened.shuffle(seed=seed, buffer_size=4) if shuffle else opened

    first = [stream(r, n) for r in range(n)]
    served: list[int] = []
    iterators = [iter(s) for s in first]
    for _ in range(min(stop, first[0].rows_per_epoch())):  # ranks step in lockstep
        served.extend(int(next(it)["idx"]) for it in iterators)
    state = json.loads(json.dumps(first[0].state_dict()))
    left = total - state["consumed"]
    if 0 < left < m:
        return  # drop_last on more ranks than rows left: refused (tested in the stream's own tests)
    for r in range(m):
        resumed = stream(r, m)
        resumed.load_state_dict(state)
        served.extend(int(row["idx"]) for row in resumed)
    counts = Counter(served)
    assert set(counts.values()) <= {1}, counts
    assert total - len(counts) < max(n, m)  # only drop_last's tail is left out


def test_a_dataloader_resume_with_workers_is_exact(tmp_path):
    files = write_files(tmp_path / "data", "json")

    def make():
        return sds.load_dataset("json", data_files=files, split="train", streaming=True).shuffle(seed=5, buffer_size=8)

    loader = StreamingDataLoader(make(), batch_size=4, num_workers=2)
    iterator = iter(loader)
    head = [int(i) for _ in range(7) for i in next(iterator)["idx"]]
    state = json.loads(json.dumps(loader.state_dict()))
    del iterator
    resumed = make()
    resumed.load_state_dict(state)
    rest = [int(i) for batch in StreamingDataLoader(resumed, batch_size=4, num_workers=2) for i in batch["idx"]]
    assert sorted(head + rest) == list(range(FILES * PER_FILE))
    # the epoch is served in the lanes of 1 rank x 2 workers dealt 4 rows at a time (each worker its own stretch)
    assert state["lanes"] == [1, 2, 4]
    assert head + rest == make().rank_order(lanes=Lanes(1, 2, 4)).tolist()
    assert len(json.dumps(state)) < 2000 and state["files"]["count"] == FILES


def test_a_file_changed_since_the_state_is_refused_naming_it(tmp_path):
    files = write_files(tmp_path / "data", "json")
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    it = iter(stream)
    for _ in range(30):
        next(it)
    state = stream.state_dict()
    with open(files[2], "a") as fh:
        fh.write(json.dumps({"idx": 999, "text": "x", "score": 0.0}) + "\n")
    os.utime(files[2], ns=(1, 1))
    again = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    with pytest.raises(ValueError, match=f"cannot resume: {files[2]} changed since the state was saved"):
        again.load_state_dict(state)
    fewer = sds.load_dataset("json", data_files=files[:4], split="train", streaming=True)
    with pytest.raises(ValueError, match=r"cannot resume: the saved stream read other data files \(5 files; this "
                                         r"stream reads 4"):
        fewer.load_state_dict(state)


def test_a_file_changed_while_streaming_is_refused_naming_it(tmp_path):
    files = write_files(tmp_path / "data", "json")
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    with open(files[1], "a") as fh:
        fh.write("\n")
    with pytest.raises(LoaderError, match=f"^{files[1]}: the file changed while it was streamed"):
        list(stream)


def test_a_bad_line_names_the_file_and_line(tmp_path):
    files = write_files(tmp_path / "data", "json")
    with open(files[3]) as fh:
        lines = fh.read().splitlines(keepends=True)
    lines[5] = '{"idx": 74, "text": "broken", \n'
    with open(files[3], "w") as fh:
        fh.write("".join(lines))
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    # lazily: the rows before the bad file are served, it is parsed only when the order reaches it
    assert [r["idx"] for r in stream.take(3 * PER_FILE)] == list(range(3 * PER_FILE))
    with pytest.raises(LoaderError, match=rf"^{files[3]}, line 6: invalid JSON \(Expecting property name enclosed "
                                          r"in double quotes at column 30\)$"):
        list(stream)


def test_a_csv_value_that_does_not_cast_names_file_line_and_column(tmp_path):
    files = write_files(tmp_path / "data", "csv")
    with open(files[4], "a") as fh:
        fh.write('oops,"row x",0.5\n')
    features = sds.Features({"idx": sds.Value("int64"), "text": sds.Value("string"), "score": sds.Value("float64")})
    with pytest.raises(LoaderError, match=rf"^{files[4]}, line 25: column 'idx': value 'oops' cannot be stored as "
                                          "int64"):  # a CSV file with quotes is counted by parsing it, when it opens
        sds.load_dataset("csv", data_files=files, split="train", streaming=True, features=features)


@pytest.mark.parametrize("fmt", ["json", "parquet", "text", "csv"])
def test_large_files_are_cut_into_units(tmp_path, monkeypatch, fmt):
    monkeypatch.setattr(file_stream, "UNIT_BYTES", 100)
    files = write_files(tmp_path / "data", fmt)
    stream = sds.load_dataset(LOADER[fmt], data_files=files, split="train", streaming=True)
    bounds = stream.source.block_bounds()
    assert len(bounds) > FILES + 1 and bounds[-1] == FILES * PER_FILE
    assert [row_id(fmt, r) for r in stream] == list(range(FILES * PER_FILE))
    assert list(stream) == sds.load_dataset(LOADER[fmt], data_files=files, split="train").to_list()
    assert sorted(row_id(fmt, r) for r in stream.shuffle(seed=2)) == list(range(FILES * PER_FILE))


def test_a_registered_builder_still_streams_its_cache(tmp_path, cache_root, toy_builder):
    stream = sds.load_dataset(str(toy_builder), split="train", streaming=True)
    assert stream.source_files() is None and len(list(stream)) > 0
    assert not nothing_under(cache_root)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(st.integers(0, 99).map(lambda i: json.dumps({"idx": i})),
                                st.integers(0, 99).map(lambda i: json.dumps({"idx": i, "m": {"k": [i]}}, indent=1)),
                                st.integers(0, 99).map(lambda i: json.dumps({"idx": i}) + " " + json.dumps({"idx": i})),
                                st.sampled_from(["", " ", "\t", "\r"])), min_size=0, max_size=12),
       ending=st.sampled_from(["\n", "\r\n"]), last=st.booleans(), lead=st.sampled_from(["", " "]))
def test_counted_json_lines_equal_the_parsed_rows(tmp_path_factory, lines, ending, last, lead):
    """The lines counted when a stream opens are the rows the JSON loader parses (blank lines, CRLF, a last line
    without its end, records after whitespace, records over several lines or two on one line)."""
    if not any(line.strip() for line in lines):
        lines = [*lines, json.dumps({"idx": 1})]
    path = tmp_path_factory.mktemp("count") / "a.jsonl"
    path.write_bytes((ending.join(lead + line for line in lines) + (ending if last else "")).encode())
    loader = sds.load_builder("json", data_files=str(path), features=sds.Features(
        {"idx": sds.Value("int64"), "m": {"k": sds.Sequence(sds.Value("int64"))}}))
    parsed = sum(t.num_rows for t in loader.read_piece([str(path), None, None]))
    assert file_stream.count_rows(loader, [str(path), None, None]) == parsed


def test_a_shuffled_epoch_parses_each_unit_once(tmp_path, monkeypatch):
    monkeypatch.setattr(file_stream, "UNIT_BYTES", 300)  # ~4 units per file, 20 in all
    files = write_files(tmp_path / "data", "json")
    parsed: Counter = Counter()
    real = file_stream.read_unit

    def counting(loader, unit, schema):
        parsed[(unit.path, unit.start)] += 1
        return real(loader, unit, schema)

    monkeypatch.setattr(file_stream, "read_unit", counting)
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    units = len(stream.source.block_bounds()) - 1
    assert stream.shuffle(seed=4, buffer_size=5).order.window_shards == file_stream.WINDOW_UNITS < units
    order = [r["idx"] for r in stream.shuffle(seed=4, buffer_size=5)]
    assert sorted(order) == list(range(FILES * PER_FILE)) and order != sorted(order)
    assert len(parsed) == units and set(parsed.values()) == {1}


def test_json_lines_on_s3_stream_like_local_ones(s3_env, tmp_path, cache_root):
    for f in range(2):
        s3_env.write(f"jsonl/part-{f}.jsonl", "".join(json.dumps(r) + "\n" for r in _records(f)).encode())
    url = f"s3://{s3_env.bucket}/jsonl/part-*.jsonl"
    stream = sds.load_dataset("json", data_files=url, split="train", streaming=True)
    assert [r["idx"] for r in stream] == list(range(2 * PER_FILE))
    rows = iter(stream)
    assert [next(rows)["idx"] for _ in range(10)] == list(range(10))
    state = json.loads(json.dumps(stream.state_dict()))
    assert not [p for p in cache_root.rglob("_metadata.json")]  # nothing built: the objects are only downloaded
    unchanged = sds.load_dataset("json", data_files=url, split="train", streaming=True)
    unchanged.load_state_dict(state)  # the objects' ETags are the same (their downloaded copies are newer)
    assert [r["idx"] for r in unchanged] == list(range(10, 2 * PER_FILE))
    s3_env.write("jsonl/part-1.jsonl", b'{"idx": 5, "text": "new", "score": 1.0}\n')
    again = sds.load_dataset("json", data_files=url, split="train", streaming=True)
    with pytest.raises(ValueError, match=rf"cannot resume: s3://{s3_env.bucket}/jsonl/part-1.jsonl changed since"):
        again.load_state_dict(state)


def test_a_stateful_dataloader_state_resumes_on_another_cluster_size(tmp_path):
    """torchdata's StatefulDataLoader on 2 ranks x 2 workers; its whole state loads into file streams on 3 ranks."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    files = write_files(tmp_path / "data", "parquet")
    opened = sds.load_dataset("parquet", data_files=files, split="train", streaming=True)
    served, states = [], []
    for rank in range(2):
        stream = on_rank(opened, rank=rank, world_size=2, loader_batch_size=6).shuffle(seed=8)
        loader = StatefulDataLoader(stream, batch_size=6, num_workers=2)
        iterator = iter(loader)
        served += [int(i) for _ in range(3) for i in next(iterator)["idx"]]
        states.append(json.loads(json.dumps(loader.state_dict())))
        del iterator
    for rank in range(3):
        resumed = on_rank(opened, rank=rank, world_size=3).shuffle(seed=8)
        resumed.load_state_dict(states[rank % 2])  # either rank's loader state
        served += [int(r["idx"]) for r in resumed]
    counts = Counter(served)
    assert states[0]["_snapshot"] and sorted(counts) == list(range(FILES * PER_FILE))
    # 36 rows served on 2 ranks; 79 left on 3 ranks are 27 each: the last step is padded with the order's first 2
    assert sum(counts.values()) == 36 + 81 and max(counts.values()) == 2


def test_a_state_over_many_files_stays_small(tmp_path, monkeypatch):
    monkeypatch.setattr(stream_state, "LISTED_FILES", 3)
    files = write_files(tmp_path / "data", "json")
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    state = stream.state_dict()
    assert "identities" not in state["files"] and state["files"]["count"] == FILES
    again = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    again.load_state_dict(state)
    with open(files[4], "a") as fh:
        fh.write("\n")
    edited = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    with pytest.raises(ValueError, match="^cannot resume: one of the 5 data files changed since the state was saved"):
        edited.load_state_dict(state)


def test_a_later_file_that_does_not_fit_the_features_names_file_and_column(tmp_path):
    """Features come from the first file; a later file is cast to them when the order reaches it."""
    first, later = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"idx": 1, "text": "a"}\n')
    later.write_text('{"idx": 2, "text": "b"}\n{"idx": "three", "text": "c"}\n')
    stream = sds.load_dataset("json", data_files=[str(first), str(later)], split="train", streaming=True)
    assert stream.features == sds.Features({"idx": sds.Value("int64"), "text": sds.Value("string")})
    with pytest.raises(LoaderError, match=rf"^{later}, line 2: column 'idx': value 'three' cannot be stored as int64"):
        list(stream)


def test_empty_files_and_json_documents_among_json_lines(tmp_path):
    lines, empty, document = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.json"
    lines.write_text('{"idx": 0}\n\n{"idx": 1}\n')
    empty.write_text("")
    document.write_text('[{"idx": 2}, {"idx": 3}]')
    files = [str(lines), str(empty), str(document)]
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    assert [r["idx"] for r in stream] == [0, 1, 2, 3]
    assert list(stream) == sds.load_dataset("json", data_files=files, split="train").to_list()
    assert sorted(r["idx"] for r in stream.shuffle(seed=1)) == [0, 1, 2, 3]


def test_a_folder_of_data_files_streams_its_files(tmp_path, cache_root):
    write_files(tmp_path / "data", "parquet")
    streams = sds.load_dataset(str(tmp_path / "data"), streaming=True)
    assert list(streams) == ["train"] and streams["train"].source_files() is not None
    assert [r["idx"] for r in streams["train"]] == list(range(FILES * PER_FILE))
    assert nothing_under(cache_root)


def test_mixed_file_streams_resume_exactly(tmp_path):
    files = write_files(tmp_path / "data", "json")

    def mix():
        first = sds.load_dataset("json", data_files=files[:2], split="train", streaming=True).shuffle(seed=1,
                                                                                                     buffer_size=5)
        second = sds.load_dataset("json", data_files=files[2:], split="train", streaming=True)
        return sds.interleave_datasets([first, second], probabilities=[0.4, 0.6], seed=3)

    whole = [r["idx"] for r in mix()]
    stopped = mix()
    rows = iter(stopped)
    head = [next(rows)["idx"] for _ in range(17)]
    state = json.loads(json.dumps(stopped.state_dict()))
    resumed = mix()
    resumed.load_state_dict(state)
    assert head + [r["idx"] for r in resumed] == whole
    assert len(set(whole)) == len(whole) and set(whole) <= set(range(FILES * PER_FILE))


def test_text_with_crlf_and_a_last_line_without_its_end(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"one\r\ntwo\r\n\r\nfour")
    stream = sds.load_dataset("text", data_files=str(path), split="train", streaming=True)
    assert [r["text"] for r in stream] == ["one", "two", "", "four"]
    assert list(stream) == sds.load_dataset("text", data_files=str(path), split="train").to_list()


def test_a_pickled_stream_reads_the_same_rows(tmp_path):
    """What a spawned DataLoader worker receives: the loader, the units and their identities, no parsed rows."""
    import pickle

    files = write_files(tmp_path / "data", "json")
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True).shuffle(seed=2, buffer_size=4)
    assert [r["idx"] for r in pickle.loads(pickle.dumps(stream))] == [r["idx"] for r in stream]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(st.tuples(st.integers(0, 99), st.sampled_from(["a", "b c", "d"])), st.just(None)),
                     max_size=10),
       last=st.booleans(), lead=st.integers(0, 2), quoted=st.booleans())
def test_counted_csv_lines_equal_the_parsed_rows(tmp_path_factory, rows, last, lead, quoted):
    """Plain CSV rows are counted as non-empty lines after the header (None: an empty line); a quote in the file
    falls back to parsing, since a quoted value may hold a line break."""
    if all(r is None for r in rows):
        rows = [*rows, (1, "a")]  # (a header alone is an error of the loader's: "Empty CSV file")
    lines = ["\n" * lead + "x,y"] + ["" if r is None else f'{r[0]},{chr(34) + r[1] + chr(34) if quoted else r[1]}'
                                      for r in rows]
    path = tmp_path_factory.mktemp("csv") / "a.csv"
    path.write_text("\n".join(lines) + ("\n" if last else ""))
    loader = sds.load_builder("csv", data_files=str(path),
                              features=sds.Features({"x": sds.Value("int64"), "y": sds.Value("string")}))
    parsed = sum(t.num_rows for t in loader.read_piece([str(path), None, None]))
    assert file_stream.count_rows(loader, [str(path), None, None]) == parsed
    assert file_stream._count_lines(loader, str(path), None, None) == (None if quoted and parsed else parsed)


def test_plain_csv_cut_into_ranges_counts_each_range(tmp_path, monkeypatch):
    monkeypatch.setattr(file_stream, "UNIT_BYTES", 64)
    path = tmp_path / "a.csv"
    path.write_text("idx,text\n" + "".join(f"{i},row {i}\n" + ("\n" if i % 7 == 0 else "") for i in range(60)))
    stream = sds.load_dataset("csv", data_files=str(path), split="train", streaming=True)
    assert len(stream.source.block_bounds()) > 5
    assert [r["idx"] for r in stream] == list(range(60))
    assert list(stream) == sds.load_dataset("csv", data_files=str(path), split="train").to_list()


def test_ranks_and_workers_each_parse_their_own_lane(tmp_path, monkeypatch):
    """2 ranks x 2 DataLoader workers over ~20 units: with lanes each unit is parsed once, plus once more for each
    lane that starts inside it; row stripes make every worker parse most units."""
    monkeypatch.setattr(file_stream, "UNIT_BYTES", 300)  # ~4 units per file
    files = write_files(tmp_path / "data", "json")
    log = tmp_path / "parsed.log"
    real = file_stream.read_unit

    def logged(loader, unit, schema):  # forked workers inherit it and append to the same file
        with open(log, "a") as fh:
            fh.write(f"{unit.path}:{unit.start}\n")
        return real(loader, unit, schema)

    monkeypatch.setattr(file_stream, "read_unit", logged)

    def parses(lanes: bool) -> Counter:
        log.write_text("")
        seen = []
        for rank in range(2):
            opened = sds.load_dataset("json", data_files=files, split="train", streaming=True)
            stream = on_rank(opened, rank=rank, world_size=2, drop_last=True)._with(lanes=lanes)
            seen += [int(i) for batch in StreamingDataLoader(stream, batch_size=4, num_workers=2) for i in batch["idx"]]
        assert sorted(seen) == list(range(FILES * PER_FILE - 1))  # 115 rows on 2 ranks, drop_last: the last dropped
        return Counter(log.read_text().split())

    starts = sds.load_dataset("json", data_files=files, split="train", streaming=True).source.block_bounds()
    units = len(starts) - 1
    bounds = Lanes(2, 2, 4).lane_bounds(FILES * PER_FILE, True)
    first = np.searchsorted(starts, bounds[:-1], side="right") - 1
    last = np.searchsorted(starts, bounds[1:] - 1, side="right") - 1
    expected = int((last - first + 1).sum())  # the units each lane covers
    in_lanes = parses(True)
    assert units >= 16 and len(in_lanes) == units and sum(in_lanes.values()) == expected <= units + 3
    assert set(in_lanes.values()) == {1, 2}
    striped = parses(False)
    assert len(striped) == units and sum(striped.values()) > 2 * expected


def test_a_file_edited_under_a_mixed_streams_state_is_named(tmp_path):
    files = write_files(tmp_path / "data", "json")

    def mix():
        first = sds.load_dataset("json", data_files=files[:2], split="train", streaming=True)
        second = sds.load_dataset("json", data_files=files[2:], split="train", streaming=True)
        return sds.interleave_datasets([first, second], seed=3)

    stopped = mix()
    rows = iter(stopped)
    [next(rows) for _ in range(9)]
    state = json.loads(json.dumps(stopped.state_dict()))
    assert state["files"]["count"] == FILES
    with open(files[3], "a") as fh:
        fh.write(json.dumps({"idx": 999, "text": "x", "score": 0.0}) + "\n")
    os.utime(files[3], ns=(1, 1))
    with pytest.raises(ValueError, match=f"cannot resume: {files[3]} changed since the state was saved"):
        mix().load_state_dict(state)


def test_a_mix_of_file_streams_is_served_in_lanes_and_resumes_on_another_world_size(tmp_path):
    """A lane of the mix is a contiguous stretch of the mix, so of each source's order: 2 ranks stop, 3 resume."""
    files = write_files(tmp_path / "data", "json")

    def mix(rank, world):
        first = sds.load_dataset("json", data_files=files[:2], split="train", streaming=True).shuffle(seed=1,
                                                                                                     buffer_size=5)
        second = sds.load_dataset("json", data_files=files[2:], split="train", streaming=True)
        return sds.interleave_datasets([on_rank(first, rank=rank, world_size=world),
                                        on_rank(second, rank=rank, world_size=world)], seed=3,
                                       stopping_strategy="all_exhausted")

    whole = [r["idx"] for r in mix(0, 1)]
    assert mix(0, 2).uses_lanes and len(whole) == 2 * 3 * PER_FILE
    streams = [mix(r, 2) for r in range(2)]
    iterators = [iter(s) for s in streams]
    served = [next(it)["idx"] for _ in range(20) for it in iterators]
    state = json.loads(json.dumps(streams[0].state_dict()))
    assert state["lanes"] == [2, 1, 1] and state["consumed"] == 40
    assert served[::2] == whole[:20]  # rank 0's lane: the head of the mix's order
    for rank in range(3):
        resumed = mix(rank, 3)
        resumed.load_state_dict(state)
        served += [r["idx"] for r in resumed]
    padding = Counter(served) - Counter(whole)  # 98 draws left on 3 ranks: 1 padded, from the head of the mix
    assert Counter(served) - padding == Counter(whole) and list(padding.elements()) == whole[:1]


def test_a_tar_is_counted_from_its_headers_and_a_bad_member_is_named_when_read(tmp_path):
    files = write_files(tmp_path / "data", "webdataset")
    loader = sds.load_builder("webdataset", data_files=files)
    for path in files:
        assert count_samples(path) == sum(1 for _ in loader.examples_of_piece([path, None, None]))
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as tar:
        for key, data in (("a", b"1"), ("b", b"{not json"), ("c", b"3")):
            for name, member in ((f"{key}.idx.json", data), (f"{key}.txt", b"text")):
                info = tarfile.TarInfo(name)
                info.size = len(member)
                tar.addfile(info, io.BytesIO(member))
    stream = sds.load_dataset("webdataset", data_files=[files[0], str(bad)], split="train", streaming=True)
    assert len(stream) == PER_FILE + 3  # counted without decoding a member
    with pytest.raises(LoaderError, match=r"bad.tar, member 'b.idx.json': cannot read the 'idx.json' member as json"):
        list(stream)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_quoted_crlf_cut_by_a_parse_block_streams_as_built(tmp_path, encoding):
    from stable_datasets.loaders.csv_files import PARSE_BLOCK_BYTES
    from tests.loaders.test_loaders import write_csv_with_quoted_crlf_at

    path = tmp_path / "crlf.csv"
    values = write_csv_with_quoted_crlf_at(path, [PARSE_BLOCK_BYTES - 1, 3 * PARSE_BLOCK_BYTES - 1], encoding)
    streamed = [r["text"] for r in sds.load_dataset("csv", data_files=str(path), split="train", streaming=True,
                                                     encoding=encoding)]
    assert streamed == values and sum(v.endswith("\r\ny") for v in streamed) == 2


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_utf16_and_utf32_files_cut_into_units_give_every_line_back(tmp_path, monkeypatch, fmt, encoding):
    from tests.loaders.test_loaders import write_text_lines

    monkeypatch.setattr(file_stream, "UNIT_BYTES", 999)  # an odd size: cuts fall anywhere
    path = tmp_path / "wide.txt"
    lines = write_text_lines(path, encoding, 40_000)
    if fmt == "json":
        path = tmp_path / "wide.jsonl"
        path.write_bytes("".join(json.dumps({"t": line}, ensure_ascii=False) + "\n" for line in lines).encode(encoding))
    stream = sds.load_dataset(fmt, data_files=str(path), split="train", streaming=True, encoding=encoding)
    assert len(stream.source.block_bounds()) > 20  # many units
    column = "text" if fmt == "text" else "t"
    assert [r[column] for r in stream] == lines
    built = sds.load_dataset(fmt, data_files=str(path), split="train", encoding=encoding)
    assert built[column] == lines


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet", "webdataset"])
def test_a_change_of_working_folder_after_open_changes_nothing_read(tmp_path, monkeypatch, fmt):
    """Hydra-style launchers chdir after the data is opened: relative data files are where they were at open."""
    here, elsewhere = write_files(tmp_path / "here", fmt), write_files(tmp_path / "elsewhere", fmt)
    for mine, other in zip(here, elsewhere):  # the same names, sizes and times, other rows
        if fmt in ("json", "csv"):
            with open(other, "r+b") as fh:
                fh.seek(os.path.getsize(other) - 3)
                fh.write(b"9}\n" if fmt == "json" else b"99\n")
        os.utime(other, ns=(os.stat(mine).st_atime_ns, os.stat(mine).st_mtime_ns))
    monkeypatch.chdir(tmp_path / "here")
    relative = [os.path.basename(p) for p in here]
    stream = sds.load_dataset(LOADER[fmt], data_files=relative, split="train", streaming=True)
    built = sds.load_dataset(LOADER[fmt], data_files=relative, split="train").to_list()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert list(stream) == built
    assert [name for name, _ in stream.source_files()] == here  # a state names the files opened
    loaded = pickle.loads(pickle.dumps(stream))  # as a DataLoader worker started later has it
    assert list(loaded) == built


def _tar(path, names) -> None:
    with tarfile.open(path, "w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"7"))


def _one_of_each(folder) -> dict:
    """Files that a stream and a build must read alike: (loader, load options) by case."""
    folder.mkdir()
    (folder / "empty.csv").write_text("")
    (folder / "header.csv").write_text("a,b\n")
    (folder / "pretty.json").write_text(json.dumps({"a": 1, "b": "x"}, indent=2) + "\n" +
                                        json.dumps({"a": 2, "b": "y"}, indent=2) + "\n")
    (folder / "single.json").write_text(json.dumps({"a": 1, "b": {"c": [1, 2]}}, indent=2))
    (folder / "shared.jsonl").write_text('{"a": 1}{"a": 2}\n{"a": 3} {"a": 4}\n{"a": 5}\n')
    (folder / "wds").mkdir()
    _tar(folder / "wds" / "s0.tar", [".DS_Store", "k0.txt", "d/.DS_Store", "k1.txt", "._k1.txt", "k2.txt"])
    (folder / "wds" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1" + bytes(64))
    _tar(folder / "lacking.tar", ["k0.txt", "k1.txt", "k1.cls"])
    return {"empty csv": ("csv", {"data_files": str(folder / "empty.csv")}),
            "header-only csv": ("csv", {"data_files": str(folder / "header.csv")}),
            "pretty-printed records": ("json", {"data_files": str(folder / "pretty.json")}),
            "one pretty-printed record": ("json", {"data_files": str(folder / "single.json")}),
            "records sharing a line": ("json", {"data_files": str(folder / "shared.jsonl")}),
            "hidden files in and beside a tar": ("webdataset", {"data_dir": str(folder / "wds")}),
            "a tar glob with a stray file": ("webdataset", {"data_files": str(folder / "wds" / "*")}),
            "a sample lacking a member": ("webdataset", {"data_files": str(folder / "lacking.tar")})}


def _outcome(loader: str, streaming: bool, options: dict):
    try:
        read = sds.load_dataset(loader, split="train", streaming=streaming, **options)
        return "rows", list(read) if streaming else read.to_list()
    except Exception as exc:  # the same error, of the same type and text
        return type(exc).__name__, str(exc)


def test_a_stream_and_a_build_read_the_same_file_alike(tmp_path):
    cases = _one_of_each(tmp_path / "files")
    outcomes = {case: (_outcome(loader, False, options), _outcome(loader, True, options))
                for case, (loader, options) in cases.items()}
    for case, (built, streamed) in outcomes.items():
        assert streamed == built, case
    rows = {case: len(built[1]) for case, (built, _) in outcomes.items() if built[0] == "rows"}
    assert rows == {"header-only csv": 0, "pretty-printed records": 2, "one pretty-printed record": 1,
                    "records sharing a line": 5, "hidden files in and beside a tar": 3,
                    "a tar glob with a stray file": 3}
    assert outcomes["empty csv"][0][0] == "LoaderError" and "empty.csv" in outcomes["empty csv"][0][1]
    lacking = outcomes["a sample lacking a member"][0]
    assert lacking[0] == "ExampleError" and "lacking.tar:k0" in lacking[1] and "split 'train'" in lacking[1]


def test_a_wrong_count_is_never_blamed_on_an_edit_and_is_counted_again(tmp_path):
    from stable_datasets.loaders import file_counts

    files = write_files(tmp_path / "data", "json")
    assert len(sds.load_dataset("json", data_files=files, split="train", streaming=True)) == FILES * PER_FILE
    stored = json.loads(file_counts.counts_path().read_text())
    entry = next(e for key, e in stored["files"].items() if key.endswith("part-1.jsonl"))
    entry["units"][0][2] += 1  # a remembered count that tiles the file but is wrong; the file is unchanged
    file_counts.counts_path().write_text(json.dumps(stored))
    stream = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    with pytest.raises(LoaderError) as info:
        list(stream)
    assert str(info.value).startswith(f"{files[1]}: holds {PER_FILE} rows as the loader reads it, but "
                                      f"{PER_FILE + 1} were counted")
    assert "changed" not in str(info.value).replace("has not changed", "")
    assert [row_id("json", r) for r in sds.load_dataset("json", data_files=files, split="train", streaming=True)] \
        == list(range(FILES * PER_FILE))  # the bad count was dropped: counted again


def _same_size_same_mtime_edit(path: str) -> None:
    """Rewrite a byte of `path` keeping its size and mtime (what input_identity="sha256" exists to see)."""
    before = os.stat(path)
    with open(path, "r+b") as fh:
        data = fh.read()
        at = data.index(b'"row ') + 5
        fh.seek(at)
        fh.write(b"X")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert [os.stat(path).st_size, os.stat(path).st_mtime_ns] == [before.st_size, before.st_mtime_ns]


def test_input_identity_sha256_refuses_a_same_size_same_mtime_edit_mid_epoch_and_on_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(file_stream, "UNIT_BYTES", 4000)  # units of ~100 rows: the last file is read well after
    files, per_file = [], 1000  # the first reads (of 1,024 rows), so its edit happens mid-epoch
    for f in range(3):
        files.append(str(tmp_path / f"part-{f}.jsonl"))
        with open(files[-1], "w") as fh:
            fh.writelines(json.dumps({"idx": f * per_file + i, "text": f"row {f}-{i}"}) + "\n" for i in range(per_file))
    options = {"data_files": files, "split": "train", "streaming": True, "input_identity": "sha256"}
    stream = sds.load_dataset("json", **options)
    assert all(identity[1].startswith("sha256:") for _, identity in stream.source_files())
    it = iter(stream)
    for _ in range(30):
        next(it)
    state = stream.state_dict()
    os.utime(files[0])  # touched, same bytes: still the same file
    _same_size_same_mtime_edit(files[2])
    with pytest.raises(LoaderError, match=f"^{files[2]}: the file changed while it was streamed"):
        list(it)
    again = sds.load_dataset("json", **options)
    assert [r["text"] for r in again][2 * per_file] == "row X-0"  # opened again: the edit is read
    with pytest.raises(ValueError, match=f"cannot resume: {files[2]} changed since the state was saved"):
        again.load_state_dict(state)
    touched = sds.load_dataset("json", **{**options, "data_files": files[:2]})
    before = touched.state_dict()
    os.utime(files[1])
    sds.load_dataset("json", **{**options, "data_files": files[:2]}).load_state_dict(before)  # same bytes: resumes
