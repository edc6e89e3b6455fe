"""Row counts of data files are remembered per node: a second open (another rank, a restart) counts nothing, an
edited file is counted again, the counts file stays bounded, and a damaged one is ignored and rewritten."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

import stable_datasets as sds
from stable_datasets.loaders import file_counts, file_stream

FILES, PER_FILE = 4, 30


def write_files(folder) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(FILES):
        path = folder / f"part-{f}.jsonl"
        path.write_text("".join(json.dumps({"idx": f * PER_FILE + i}) + "\n" for i in range(PER_FILE)))
        paths.append(str(path))
    return paths


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The units counted (a log file, so counts made in other processes show too), by file name."""
    monkeypatch.setattr(file_stream, "UNIT_BYTES", 200)  # a few units per file
    log = tmp_path / "counted.log"
    log.write_text("")
    real = file_stream.count_rows

    def logged(loader, piece):
        with open(log, "a") as fh:
            fh.write(os.path.basename(piece[0]) + "\n")
        return real(loader, piece)

    monkeypatch.setattr(file_stream, "count_rows", logged)

    def read() -> list[str]:
        lines = log.read_text().split()
        log.write_text("")
        return sorted(lines)

    return read


def ids(files) -> list[int]:
    return [r["idx"] for r in sds.load_dataset("json", data_files=files, split="train", streaming=True)]


def test_a_second_open_counts_nothing_and_an_edited_file_is_counted_again(tmp_path, counted):
    files = write_files(tmp_path / "data")
    assert ids(files) == list(range(FILES * PER_FILE))
    first = counted()
    assert set(first) == {f"part-{f}.jsonl" for f in range(FILES)} and len(first) > FILES  # several units a file
    assert ids(files) == list(range(FILES * PER_FILE))
    assert counted() == []  # another rank of the node, or a restart: every count is known
    with open(files[2], "a") as fh:
        fh.write(json.dumps({"idx": 999}) + "\n")
    again = sds.load_dataset("json", data_files=files, split="train", streaming=True)
    assert len(again) == FILES * PER_FILE + 1 and 999 in [r["idx"] for r in again]
    assert set(counted()) == {"part-2.jsonl"}  # only the edited file
    stored = json.loads(file_counts.counts_path().read_text())
    assert stored["format"] == 1 and len(stored["files"]) == FILES


def test_the_counts_file_is_bounded_and_a_damaged_one_is_rewritten(tmp_path, counted, monkeypatch, warnings_logged):
    monkeypatch.setattr(file_counts, "MAX_FILES", 3)
    files = write_files(tmp_path / "data")
    ids(files)
    stored = json.loads(file_counts.counts_path().read_text())
    assert [key.rsplit("/", 1)[-1] for key in stored["files"]] == ["part-1.jsonl", "part-2.jsonl", "part-3.jsonl"]
    counted()
    ids(files)
    assert set(counted()) == {"part-0.jsonl"}  # dropped from the file, so counted again (and part-1 dropped)
    stored = json.loads(file_counts.counts_path().read_text())
    assert [key.rsplit("/", 1)[-1] for key in stored["files"]] == ["part-2.jsonl", "part-3.jsonl", "part-0.jsonl"]
    file_counts.counts_path().write_text("{not json")
    assert ids(files) == list(range(FILES * PER_FILE))
    assert any("ignoring the row counts in" in message for message in warnings_logged)
    assert json.loads(file_counts.counts_path().read_text())["format"] == 1


def _open(files: list[str]) -> None:
    assert len(sds.load_dataset("json", data_files=files, split="train", streaming=True)) == FILES * PER_FILE


def test_the_ranks_of_a_node_count_once(tmp_path, counted):
    """Four processes open the same files at once: the first counts under the lock, the others find the counts."""
    files = write_files(tmp_path / "data")
    context = multiprocessing.get_context("fork")
    ranks = [context.Process(target=_open, args=(files,)) for _ in range(4)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(60)
    assert [p.exitcode for p in ranks] == [0] * 4
    once = counted()
    _open(files)
    assert counted() == []
    assert set(once) == {f"part-{f}.jsonl" for f in range(FILES)}
    file_counts.counts_path().unlink()
    _open(files)
    assert counted() == once  # each unit counted once in all: the four ranks counted what one counts


def test_a_local_folder_that_cannot_be_written_only_costs_the_counts(tmp_path, counted, monkeypatch, warnings_logged):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the local cache folder should be")
    monkeypatch.setenv("STABLE_DATASETS_LOCAL_CACHE_DIR", str(blocked))
    files = write_files(tmp_path / "data")
    assert ids(files) == list(range(FILES * PER_FILE))
    assert ids(files) == list(range(FILES * PER_FILE))
    assert len(counted()) > 2 * FILES  # counted at each open
    assert any("cannot keep row counts in" in message for message in warnings_logged)


def _forge(path_name: str, change) -> None:
    stored = json.loads(file_counts.counts_path().read_text())
    key = next(k for k in stored["files"] if k.endswith(path_name))
    stored["files"][key]["units"] = change(stored["files"][key]["units"])
    file_counts.counts_path().write_text(json.dumps(stored))


FORGERIES = {
    "a gap": lambda units: [units[0], [units[1][0] + 1, *units[1][1:]], *units[2:]],
    "an overlap": lambda units: [units[0], [units[1][0] - 1, *units[1][1:]], *units[2:]],
    "short of the end": lambda units: units[:-1],
    "past the end": lambda units: [*units[:-1], [units[-1][0], units[-1][1] + 10, units[-1][2]]],
    "not from 0": lambda units: units[1:],
    "out of order": lambda units: [units[1], units[0], *units[2:]],
    "an empty range": lambda units: [[0, 0, 0], *units],
    "whole beside ranges": lambda units: [[None, None, 5], *units],
    "negative rows": lambda units: [[*units[0][:2], -1], *units[1:]],
    "rows as text": lambda units: [[*units[0][:2], "7"], *units[1:]],
    "rows as a bool": lambda units: [[*units[0][:2], True], *units[1:]],
    "fractional offsets": lambda units: [[units[0][0], units[0][1] + 0.5, units[0][2]], *units[1:]],
    "no units": lambda units: [],
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_remembered_units_that_do_not_tile_the_file_are_counted_again_and_replaced(tmp_path, counted, forgery):
    files = write_files(tmp_path / "data")
    ids(files)
    good = json.loads(file_counts.counts_path().read_text())
    counted()
    _forge("part-1.jsonl", FORGERIES[forgery])
    assert ids(files) == list(range(FILES * PER_FILE))
    assert set(counted()) == {"part-1.jsonl"}  # the bad entry is counted again, the others are trusted
    assert json.loads(file_counts.counts_path().read_text()) == good  # and replaced


def test_remembered_parquet_units_tile_its_row_groups(tmp_path, counted):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"idx": list(range(100))}), path, row_group_size=10)
    read = lambda: [r["idx"] for r in sds.load_dataset("parquet", data_files=str(path), split="train",  # noqa: E731
                                                       streaming=True)]
    assert read() == list(range(100))
    counted()
    assert read() == list(range(100)) and counted() == []  # row groups [0, 10): trusted
    _forge("rows.parquet", lambda units: units[:-1])  # the last row groups left out: 90 rows
    assert read() == list(range(100))
