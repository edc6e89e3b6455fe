"""Duplicate example keys, found in memory bounded by a constant, whatever the rows.

A split's example keys must be unique. Holding every key in a dict costs ~65 bytes a row, so
a billion-row split would need ~65 GB in one process. Instead:

- a part holds its first `memory_keys` keys in a dict, so a duplicate among them is refused at
  once, as the builder yields it; past that, keys go to a buffer that is sorted by digest and
  spilled to a run file every `memory_keys` keys (`KeyLog`);
- at the part's end its runs are merged into one file sorted by (digest, position): the merge
  finds any duplicate the dict could not see (`merge_sorted`);
- a part cuts its sorted keys into P digest ranges (`range_bounds`: the same cuts in every part), one file
  per range (`RangedKeyWriter`), so the check across parts runs as P jobs (write.key_check), each merging
  one range of every part (`merge_sorted` with its `digest_range`): a key two parts both wrote has one
  digest, so both copies meet in the same range.

A merge reads each sorted file a record batch at a time and holds at most ~`MERGE_ROWS` rows of
all of them at once; more than `FAN_IN` files are merged in passes, so open files stay few too.
Two keys are the same when their texts are (a digest collision alone is not a duplicate). The
duplicate named is the first in build order: the earliest row whose key an earlier row had.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: a sorted key file: each key's digest, its position in build order, its JSON text
KEYS_SCHEMA = pa.schema([("digest", pa.uint64()), ("order", pa.int64()), ("key", pa.string())])
#: keys a part holds in memory (a dict until it first spills, then the buffer of one run)
MEMORY_KEYS = 1 << 19
#: rows per record batch of a sorted key file: the unit a merge reads
FILE_BATCH_ROWS = 1 << 14
#: rows a merge holds from all its files at once (at least one record batch of each)
MERGE_ROWS = 1 << 20
#: files one merge pass reads at once; more are merged in passes
FAN_IN = 64


def key_marker(key: Any) -> Any:
    """What makes two keys the same: ints and strings by value, anything else by type and value."""
    return key if isinstance(key, (int, str)) else (type(key).__name__, key)


def key_digest(marker: Any) -> int:
    return int.from_bytes(hashlib.blake2b(repr(marker).encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "little")


def key_text(key: Any) -> str:
    try:
        return json.dumps(key)
    except (TypeError, ValueError):
        return json.dumps(repr(key))


class KeySink:
    """Where sorted key batches go, in order: `write_batch` each, then `close` (the file appears whole) or
    `abort`."""

    def write_batch(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError


class _FileSink(KeySink):
    """One sorted key file, written under a temporary name and renamed when closed."""

    def __init__(self, path: Path, batch_rows: int | None = None):
        self.path, self.batch_rows = path, batch_rows or FILE_BATCH_ROWS
        self._tmp = path.with_name(f".{path.name}.tmp")
        self._sink = pa.OSFile(str(self._tmp), "wb")
        self._writer = pa.ipc.new_file(self._sink, KEYS_SCHEMA)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write_table(pa.Table.from_batches([batch], KEYS_SCHEMA), max_chunksize=self.batch_rows)

    def _shut(self) -> None:
        self._writer.close()
        self._sink.close()

    def close(self) -> None:
        self._shut()
        self._tmp.replace(self.path)

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._shut()
        self._tmp.unlink(missing_ok=True)


#: digests are uint64: range bounds go up to this (exclusive)
DIGEST_END = 1 << 64


def range_bounds(ranges: int) -> list[int]:
    """The P + 1 bounds of P digest ranges (range r holds digests in [bounds[r], bounds[r + 1])): the top bits
    of the digest when P is a power of two; the same for every part that cuts into P ranges."""
    if ranges < 1:
        raise ValueError(f"key ranges must be at least 1, got {ranges}")
    return [(r << 64) // ranges for r in range(ranges + 1)]


def range_file_name(index: int) -> str:
    return f"{index:05d}.arrow"


class RangedKeyWriter(KeySink):
    """Sorted keys cut into `ranges` digest ranges, one sorted key file per range in `folder`
    (`range_file_name`); a range without keys has no file. `counts` gives the keys of each range once closed.
    Reading a range reads its file only."""

    def __init__(self, folder: Path, ranges: int, batch_rows: int | None = None):
        self.folder, self.batch_rows = folder, batch_rows
        self.bounds = range_bounds(ranges)
        self._inner = np.array(self.bounds[1:-1], np.uint64)
        self.counts = [0] * ranges
        self._current: tuple[int, _FileSink] | None = None
        shutil.rmtree(folder, ignore_errors=True)  # files of a killed attempt
        folder.mkdir(parents=True)

    def write_batch(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        digest = batch.column(0).to_numpy()
        cuts = [0, *np.searchsorted(digest, self._inner, side="left").tolist(), len(digest)]
        for index in range(len(self.counts)):
            lo, hi = cuts[index], cuts[index + 1]
            if hi > lo:
                self._sink(index).write_batch(batch.slice(lo, hi - lo))
                self.counts[index] += hi - lo

    def _sink(self, index: int) -> _FileSink:
        if self._current is not None and self._current[0] != index:
            if self._current[0] > index:
                raise ValueError("keys written to a RangedKeyWriter must be sorted by digest")
            self._current[1].close()
            self._current = None
        if self._current is None:
            self._current = (index, _FileSink(self.folder / range_file_name(index), self.batch_rows))
        return self._current[1]

    def close(self) -> None:
        if self._current is not None:
            self._current[1].close()
            self._current = None

    def abort(self) -> None:
        if self._current is not None:
            self._current[1].abort()
            self._current = None
        shutil.rmtree(self.folder, ignore_errors=True)


def _sink_for(out: Path | KeySink, batch_rows: int | None) -> KeySink:
    return out if isinstance(out, KeySink) else _FileSink(out, batch_rows)


def write_sorted_keys(out: Path | KeySink, digests: np.ndarray, orders: np.ndarray, texts: pa.Array,
                      batch_rows: int | None = None) -> None:
    """Keys sorted by (digest, order) into a key file at `out` (or into a KeySink such as a RangedKeyWriter,
    which is closed), in record batches of `batch_rows`."""
    index = np.lexsort((orders, digests))
    table = pa.table({"digest": pa.array(digests[index], pa.uint64()), "order": pa.array(orders[index], pa.int64()),
                      "key": texts.take(pa.array(index))}, schema=KEYS_SCHEMA)
    sink = _sink_for(out, batch_rows)
    try:
        for batch in table.to_batches(max_chunksize=batch_rows or FILE_BATCH_ROWS):
            sink.write_batch(batch)
    except BaseException:
        sink.abort()
        raise
    sink.close()


class KeyLog:
    """The keys of one part, in build order; `add` refuses a repeat it can see, `finish` finds the rest."""

    def __init__(self, runs_dir: Path, memory_keys: int | None = None, batch_rows: int | None = None,
                 fan_in: int | None = None):
        self.runs_dir = runs_dir
        self.memory_keys = memory_keys or MEMORY_KEYS
        self.batch_rows, self.fan_in = batch_rows, fan_in
        self.stats = MergeStats()
        self.seen: dict[Any, Any] | None = {}  # marker -> key, until the first spill
        self.count = 0
        self.runs: list[Path] = []
        self._digests: list[int] = []
        self._texts: list[str] = []
        shutil.rmtree(runs_dir, ignore_errors=True)  # runs of a killed attempt

    def add(self, key: Any) -> bool:
        """Record the next key; False when it repeats a key still held in memory. TypeError: not hashable."""
        marker = key_marker(key)
        if self.seen is not None:
            if marker in self.seen:
                return False
            self.seen[marker] = key
            self.count += 1
            if len(self.seen) >= self.memory_keys:
                markers = list(self.seen)
                self._digests = [key_digest(m) for m in markers]
                self._texts = [key_text(self.seen[m]) for m in markers]
                self.seen = None
                self._spill()
            return True
        hash(marker)  # the same refusal of an unhashable key as the dict gives
        self._digests.append(key_digest(marker))
        self._texts.append(key_text(key))
        self.count += 1
        if len(self._digests) >= self.memory_keys:
            self._spill()
        return True

    def _spill(self) -> None:
        first = self.count - len(self._digests)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        path = self.runs_dir / f"run-{len(self.runs):06d}.arrow"
        write_sorted_keys(path, np.array(self._digests, np.uint64), np.arange(first, self.count, dtype=np.int64),
                          pa.array(self._texts, pa.string()), self.batch_rows)
        self.runs.append(path)
        self._digests, self._texts = [], []

    def finish(self, out: Path | KeySink | None) -> Any | None:
        """The first key of this part that repeats an earlier one, if the memory held could not tell;
        else None, after writing every key, sorted, to `out` (a file, or a KeySink such as a RangedKeyWriter;
        when given). Run files are removed."""
        try:
            if self.seen is not None:  # never spilled: all keys were checked as they came
                if out is not None:
                    markers = list(self.seen)
                    digests = np.fromiter((key_digest(m) for m in markers), np.uint64, count=len(markers))
                    write_sorted_keys(out, digests, np.arange(len(markers), dtype=np.int64),
                                      pa.array([key_text(self.seen[m]) for m in markers], pa.string()), self.batch_rows)
                return None
            if self._digests:
                self._spill()
            found = merge_sorted([(r, 0) for r in self.runs], out, self.runs_dir / "merge", self.stats,
                                 fan_in=self.fan_in)
            return None if found is None else json.loads(found.key)
        finally:
            shutil.rmtree(self.runs_dir, ignore_errors=True)


@dataclass
class Duplicate:
    """The first row (in build order) whose key an earlier row had."""

    key: str  # its JSON text
    order: int


@dataclass
class MergeStats:
    """What a merge held at most (the numpy arrays of one round: digests, orders, sort index)."""

    peak_bytes: int = 0
    rounds: int = 0
    passes: int = 0


class _Source:
    """One sorted key file, read a record batch at a time; `offset` is added to its orders; only digests in
    `digest_range` [lo, hi) are kept (None: all). The file is read, not memory-mapped: the pages of a mapped
    file stay in the process's RSS (and a container's memory limit counts them) until the kernel needs them
    back."""

    def __init__(self, path: Path, offset: int, digest_range: tuple[int, int] | None = None):
        self._map = pa.OSFile(str(path))  # read, not mapped: the pages read are not kept (a mapped file's are)
        self._reader = pa.ipc.open_file(self._map)
        self._next = 0
        self.offset = offset
        lo, hi = digest_range or (0, DIGEST_END)
        self._lo = np.uint64(lo) if lo > 0 else None
        self._hi = np.uint64(hi) if hi < DIGEST_END else None
        self.digest = np.zeros(0, np.uint64)
        self.order = np.zeros(0, np.int64)
        self.keys: pa.Array = pa.array([], pa.string())

    @property
    def done(self) -> bool:
        return not len(self.digest) and self._next >= self._reader.num_record_batches

    def fill(self, rows: int) -> None:
        """Buffer at least `rows` rows (or the rest of the file, or of its digest range)."""
        while len(self.digest) < rows and self._next < self._reader.num_record_batches:
            batch = self._reader.get_batch(self._next)
            self._next += 1
            digest = batch.column(0).to_numpy()
            if self._lo is not None or self._hi is not None:
                start = int(np.searchsorted(digest, self._lo)) if self._lo is not None else 0
                stop = int(np.searchsorted(digest, self._hi)) if self._hi is not None else len(digest)
                if stop < len(digest):  # past the range: the rest of the file is not read
                    self._next = self._reader.num_record_batches
                if (start, stop) != (0, len(digest)):
                    batch, digest = batch.slice(start, stop - start), digest[start:stop]
                if not len(digest):
                    continue
            order = batch.column(1).to_numpy() + self.offset
            if len(self.digest):
                self.digest = np.concatenate([self.digest, digest])
                self.order = np.concatenate([self.order, order])
                self.keys = pa.concat_arrays([self.keys, batch.column(2)])
            else:
                self.digest, self.order, self.keys = digest, order, batch.column(2)

    def take_to(self, bound: int) -> tuple[np.ndarray, np.ndarray, pa.Array]:
        """Remove and return the buffered rows whose digest is at most `bound`."""
        k = int(np.searchsorted(self.digest, np.uint64(bound), side="right"))
        taken = self.digest[:k], self.order[:k], self.keys.slice(0, k)
        self.digest, self.order, self.keys = self.digest[k:], self.order[k:], self.keys.slice(k)
        return taken

    def close(self) -> None:
        self._map.close()


def merge_sorted(files: list[tuple[Path, int]], out: Path | KeySink | None, scratch: Path,
                 stats: MergeStats | None = None, *, fan_in: int | None = None, merge_rows: int | None = None,
                 digest_range: tuple[int, int] | None = None) -> Duplicate | None:
    """Merge sorted key files ((path, order offset) each): the first duplicate in build order, or None
    after writing the merged keys to `out` (a file or a KeySink, which is closed; when given). More than
    `fan_in` files go in passes through `scratch`, which is removed. `stats` (when given) learns what the
    merge held at most. With `digest_range` (lo, hi), only digests in [lo, hi) of each file take part."""
    stats = stats if stats is not None else MergeStats()
    fan_in, merge_rows = max(2, fan_in or FAN_IN), merge_rows or MERGE_ROWS
    sink = None if out is None else _sink_for(out, None)
    try:
        files = list(files)
        level = 0
        best: Duplicate | None = None
        while len(files) > fan_in:  # merge the first fan_in into one file (orders already offset) and repeat
            scratch.mkdir(parents=True, exist_ok=True)
            merged = scratch / f"pass-{level:06d}.arrow"
            level += 1
            pass_sink = _FileSink(merged)
            try:
                found = _merge_pass(files[:fan_in], pass_sink, stats, merge_rows, digest_range)
            except BaseException:
                pass_sink.abort()
                raise
            pass_sink.close()  # whole even when a duplicate was found: the next pass reads it
            if found is not None:  # a duplicate found in an earlier pass is not always the first: go on
                best = found if best is None or found.order < best.order else best
            files = [(merged, 0), *files[fan_in:]]
        last = _merge_pass(files, sink if best is None else None, stats, merge_rows, digest_range)
        if last is not None and (best is None or last.order < best.order):
            best = last
        if sink is not None:
            if best is None:
                sink.close()
            else:
                sink.abort()
            sink = None
        return best
    finally:
        if sink is not None:
            sink.abort()
        shutil.rmtree(scratch, ignore_errors=True)


def _merge_pass(files: list[tuple[Path, int]], writer: KeySink | None, stats: MergeStats, merge_rows: int,
                digest_range: tuple[int, int] | None) -> Duplicate | None:
    """One merge of `files` into `writer` (when given; the caller closes it): the first duplicate it saw."""
    stats.passes += 1
    sources = [_Source(path, offset, digest_range) for path, offset in files]
    per_source = max(1, merge_rows // max(1, len(sources)))
    best: Duplicate | None = None
    carry = _empty_carry()
    try:
        while True:
            for source in sources:
                source.fill(per_source)
            live = [s for s in sources if len(s.digest)]
            if not live:
                break
            bound = min(int(s.digest[-1]) for s in live)
            taken = [s.take_to(bound) for s in live]
            digest = np.concatenate([t[0] for t in taken])
            order = np.concatenate([t[1] for t in taken])
            index = np.lexsort((order, digest))
            stats.rounds += 1
            stats.peak_bytes = max(stats.peak_bytes, digest.nbytes + order.nbytes + index.nbytes
                                   + sum(s.digest.nbytes + s.order.nbytes for s in sources))
            digest, order = digest[index], order[index]
            keys: pa.Array | None = None
            if writer is not None:
                keys = _sorted_keys(taken, index)
                writer.write_batch(pa.record_batch([pa.array(digest, pa.uint64()), pa.array(order, pa.int64()), keys],
                                                   schema=KEYS_SCHEMA))
            if (digest[1:] == digest[:-1]).any() or (len(carry[0]) and digest[0] == carry[0][0]):
                keys = keys if keys is not None else _sorted_keys(taken, index)
                found, carry = _duplicates(carry, digest, order, keys)
                if found is not None and (best is None or found.order < best.order):
                    best = found
            else:  # all digests differ: the last row alone may meet its like in the next round
                last = keys[-1:] if keys is not None else _taken_last(taken, index)
                carry = (digest[-1:], order[-1:], last)
    finally:
        for source in sources:
            source.close()
    return best


def _sorted_keys(taken: list[tuple[np.ndarray, np.ndarray, pa.Array]], index: np.ndarray) -> pa.Array:
    return pa.concat_arrays([t[2] for t in taken]).take(pa.array(index))


def _taken_last(taken: list[tuple[np.ndarray, np.ndarray, pa.Array]], index: np.ndarray) -> pa.Array:
    """The key text of the last row of a round in sorted order, without joining the round's texts."""
    position = int(index[-1])
    for _, _, keys in taken:
        if position < len(keys):
            return keys.slice(position, 1)
        position -= len(keys)
    raise IndexError(position)


def _empty_carry() -> tuple[np.ndarray, np.ndarray, pa.Array]:
    return np.zeros(0, np.uint64), np.zeros(0, np.int64), pa.array([], pa.string())


def _duplicates(carry: tuple[np.ndarray, np.ndarray, pa.Array], digest: np.ndarray, order: np.ndarray,
                keys: pa.Array) -> tuple[Duplicate | None, tuple[np.ndarray, np.ndarray, pa.Array]]:
    """Among the rows whose digest repeats (with the previous round's last digest group carried in): the
    earliest later occurrence of a text; and the first occurrences of the round's last digest group."""
    digest = np.concatenate([carry[0], digest])
    order = np.concatenate([carry[1], order])
    keys = pa.concat_arrays([carry[2], keys])
    same = np.zeros(len(digest), bool)
    same[1:] = digest[1:] == digest[:-1]
    same[:-1] |= digest[:-1] == digest[1:]
    same |= digest == digest[-1]  # the last group goes on into the next round
    rows = np.flatnonzero(same)
    table = pa.table({"digest": pa.array(digest[rows], pa.uint64()), "key": keys.take(pa.array(rows)),
                      "order": pa.array(order[rows], pa.int64())})
    table = table.sort_by([("digest", "ascending"), ("key", "ascending"), ("order", "ascending")])
    d = table.column("digest").to_numpy()
    k = table.column("key").combine_chunks()
    later = np.zeros(len(d), bool)
    if len(d) > 1:
        later[1:] = (d[1:] == d[:-1]) & pc.equal(k.slice(1), k.slice(0, len(d) - 1)).to_numpy(zero_copy_only=False)
    found = None
    if later.any():
        o = table.column("order").to_numpy()
        candidates = np.flatnonzero(later)
        first = int(candidates[np.argmin(o[candidates])])
        found = Duplicate(key=k[first].as_py(), order=int(o[first]))
    keep = (d == digest[-1]) & ~later  # first occurrences of each text in the last group
    chosen = np.flatnonzero(keep)
    carry = (d[chosen], table.column("order").to_numpy()[chosen], k.take(pa.array(chosen)))
    return found, carry


def iter_keys(path: Path) -> Iterator[tuple[int, int, str]]:
    """(digest, order, key text) of a sorted key file, in its order (for tests and tools)."""
    with pa.memory_map(str(path)) as source:
        table = pa.ipc.open_file(source).read_all()
    yield from zip(table.column("digest").to_pylist(), table.column("order").to_pylist(),
                   table.column("key").to_pylist())


def sorted_key_count(path: Path) -> int:
    """Rows of a part's key file, which is made a sorted key file first if an earlier version of the library
    wrote it (a part finished before an upgrade and reused by the resumed build: its keys in build order,
    digest and text only)."""
    with pa.OSFile(str(path)) as source:  # read into memory, not mapped: the file is rewritten below
        reader = pa.ipc.open_file(source)
        if reader.schema.equals(KEYS_SCHEMA):
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        table = reader.read_all()
    write_sorted_keys(path, table.column("digest").to_numpy(), np.arange(len(table), dtype=np.int64),
                      table.column("key").combine_chunks())
    return len(table)
