"""`stable-datasets megatron-preprocess`: Megatron-LM's `tools/preprocess_data.py`, the same files out, faster.

What Megatron-LM's script writes, and so what this writes, for each `--json-keys` key:
`{output_prefix}_{key}_document.bin/.idx` with
- the dtype of the tokenizer's vocabulary (uint16 below 65,500 ids, else int32), not of the ids seen;
- one document per input row; a text is one sequence, a list of texts (pre-split sentences) one sequence per
  text; a text with no tokens adds no sequence, so a row with none is a document of zero sequences;
- ids as the tokenizer gives them with its special tokens (`tokenizer(text).input_ids` in transformers, which is
  `encode(text, add_special_tokens=True)` of the `tokenizers` library underneath), and with `--append-eod` the
  tokenizer's end-of-document id (its eos token) after the last sequence of every document that has tokens.

How it is faster: the input is read by our loaders into an Arrow cache (JSON Lines and Parquet by Arrow's
readers, in `--workers` parts; any `load_dataset` source too, local or in an object store); the rows are cut into
`--workers` contiguous ranges, each tokenized in its own process a batch at a time (`encode_batch`, Rust) into a
part `.bin/.idx`; the parts are merged by appending their `.bin` files and offsetting their indices (no token is
rewritten). With `engine="ray"` the parts instead come back through Ray's object store and are written here in
order, so the cluster's nodes need share no disk with this machine (`_write_from_ray`). Megatron-LM instead
parses each line with `json.loads`, sends every document through a Pool pipe and writes it with one
`add_document` call in the parent.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from loguru import logger

from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.errors import StableDatasetsError
from stable_datasets.megatron.indexed import IndexedWriter, fit_tokens, merge_indexed, optimal_dtype
from stable_datasets.write.engines import JobRunner, ensure_ray, import_ray, ray_node_id, ray_single_node, stream_ray

#: rows tokenized per call of `encode_batch`
BATCH_ROWS = 2048
#: names of end-of-document tokens looked for when the tokenizer names no eos token
EOD_NAMES = ("<|endoftext|>", "</s>", "<eos>", "<|eos|>", "<|end_of_text|>", "[SEP]")
#: input files read by a loader of ours, by ending; anything else is a `load_dataset` source
FILE_LOADERS = {".jsonl": "json", ".json": "json", ".jsonl.gz": "json", ".json.gz": "json", ".jsonl.zst": "json",
                ".parquet": "parquet", ".pq": "parquet"}


class PreprocessError(StableDatasetsError, ValueError):
    """A preprocessing input or option that cannot give Megatron-LM's output: names the key, row or option."""


@dataclass(frozen=True)
class TokenizerSpec:
    """Where a tokenizer comes from, and its end-of-document id: picklable, each worker loads its own copy."""

    source: str  # a tokenizer.json file, a folder holding one, or a Hugging Face name
    eod: int | None = None
    #: the tokenizer's JSON as the driver loaded it: a Ray task on another node cannot see the driver's file, and
    #: a node may have no way to Hugging Face (or get another revision); "" loads from `source`
    text: str = field(default="", repr=False)

    def load(self) -> Any:
        from tokenizers import Tokenizer  # local: the [sft] extra's package, needed by this command only

        if self.text:
            return Tokenizer.from_str(self.text)
        path = Path(self.source)
        if path.is_dir():
            path = path / "tokenizer.json"
        if path.is_file():
            return Tokenizer.from_file(str(path))
        if path.exists() or path.suffix == ".json" or self.source.startswith((".", "/")) or self.source.count("/") > 1:
            raise PreprocessError(f"--tokenizer {self.source}: no tokenizer.json there")
        return Tokenizer.from_pretrained(self.source)  # a Hugging Face name


def tokenizer_spec(source: str, eod: int | None = None) -> tuple[TokenizerSpec, int]:
    """(the spec with its end-of-document id resolved, the vocabulary size Megatron-LM takes the dtype from:
    every id, added tokens included, as `len(tokenizer)` in transformers)."""
    spec = TokenizerSpec(source, eod)
    tokenizer = spec.load()
    if eod is None:
        eod = _configured_eos(source, tokenizer)
    return TokenizerSpec(source, eod, tokenizer.to_str()), int(tokenizer.get_vocab_size(with_added_tokens=True))


def _configured_eos(source: str, tokenizer: Any) -> int | None:
    """The eos token of `tokenizer_config.json` beside the tokenizer (what Megatron-LM's wrapper uses as eod), else
    the first of EOD_NAMES the vocabulary has."""
    folder = Path(source) if Path(source).is_dir() else Path(source).parent
    try:
        eos = json.loads((folder / "tokenizer_config.json").read_text()).get("eos_token")
    except (OSError, ValueError):
        eos = None
    if isinstance(eos, dict):
        eos = eos.get("content")
    for name in ([eos] if eos else []) + list(EOD_NAMES):
        found = tokenizer.token_to_id(name)
        if found is not None:
            return int(found)
    return None


def output_prefix_of(output_prefix: str, key: str) -> str:
    """Megatron-LM's name for one key's output: `{prefix}_{key}_document`."""
    return f"{output_prefix}_{key}_document"


def preprocess(dataset: StableDataset, json_keys: list[str], tokenizer: TokenizerSpec, output_prefix: str, *,
               vocab_size: int, append_eod: bool = False, workers: int = 1, engine: str = "process",
               ray_address: str | None = None) -> list[str]:
    """Tokenize the `json_keys` columns of `dataset` into Megatron's indexed files, one pair per key; their
    prefixes. `workers` processes, or Ray tasks (`engine="ray"`: on the cluster at `ray_address` or $RAY_ADDRESS,
    whose nodes need share no disk, see `_write_from_ray`), each take a contiguous range of rows; their parts are
    written in order."""
    missing = [k for k in json_keys if k not in dataset.column_names]
    if missing:
        raise PreprocessError(f"--json-keys {missing} not in the input; its columns are {dataset.column_names}")
    if append_eod and tokenizer.eod is None:
        raise PreprocessError(f"--append-eod: the tokenizer {tokenizer.source} names no eos token; pass --eod-id")
    dtype = np.dtype(optimal_dtype(vocab_size))
    rows = len(dataset)
    jobs = max(1, min(workers, rows))
    bounds = [rows * j // jobs for j in range(jobs + 1)]
    outputs = [output_prefix_of(output_prefix, key) for key in json_keys]
    Path(outputs[0]).parent.mkdir(parents=True, exist_ok=True)
    if engine == "ray":
        _write_from_ray(dataset, json_keys, tokenizer, bounds, outputs, append_eod, dtype, ray_address)
        return outputs
    staging = Path(tempfile.mkdtemp(prefix=".megatron-parts-", dir=Path(outputs[0]).parent))
    try:
        calls = [(dataset, json_keys, tokenizer, bounds[j], bounds[j + 1], str(staging / f"part-{j:05d}"),
                  append_eod, dtype.str) for j in range(jobs)]
        JobRunner(engine=engine, num_proc=jobs)(_encode_part, calls, desc="tokenize")
        for key, out in zip(json_keys, outputs):
            merge_indexed([f"{staging}/part-{j:05d}_{key}" for j in range(jobs)], out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return outputs


def _encode_part(dataset: StableDataset, keys: list[str], spec: TokenizerSpec, start: int, stop: int, prefix: str,
                 append_eod: bool, dtype: str) -> int:
    """Rows [start, stop) of `dataset` -> `{prefix}_{key}.bin/.idx` for each key (runs in a worker)."""
    tokenizer = spec.load()
    with _all_or_none({key: IndexedWriter(f"{prefix}_{key}", np.dtype(dtype)) for key in keys}) as writers:
        for first, table in _batches(dataset, keys, start, stop):
            for key in keys:
                values, lengths, documents = encode_column(table.column(key), tokenizer,
                                                           spec.eod if append_eod else None, key, first)
                writers[key].add_block(values, lengths, documents)
    return stop - start


@contextmanager
def _all_or_none(writers: dict[str, IndexedWriter]) -> Iterator[dict[str, IndexedWriter]]:
    """The writers of one output per key, all committed when the block ends, all discarded if it raises: a failed
    part or run leaves no key's files half-written."""
    try:
        yield writers
        for writer in writers.values():
            writer.commit()
    except BaseException:
        for writer in writers.values():
            writer.discard()
        raise


# -- Ray: parts through the object store ---------------------------------------------------------------------------
def _write_from_ray(dataset: StableDataset, keys: list[str], spec: TokenizerSpec, bounds: list[int],
                    outputs: list[str], append_eod: bool, dtype: np.dtype, ray_address: str | None) -> None:
    """The ranges tokenized as Ray tasks whose parts come back through Ray's object store a batch of rows at a
    time, written here in order into one IndexedWriter per key (nothing visible until whole, `.idx` last; the
    bytes `merge_indexed` makes of the same parts): no task needs a disk this process can read, and this
    process holds one batch's tokens and the index arrays. The tokenizer travels as its JSON; the rows as the
    tasks can read them (`_ray_calls`). On a cluster of one node the tasks run on it (this process's node)."""
    jobs = len(bounds) - 1
    runner = JobRunner(engine="ray", num_proc=jobs, ray_address=ray_address)
    ray = ensure_ray(ray_address)
    here = ray_single_node(ray)
    calls = _ray_calls(ray, dataset, keys, ray.put(spec), bounds, append_eod, dtype, here)
    documents, nodes = np.zeros(jobs, np.int64), [""] * jobs  # documents written per part (one per row and key)
    with _all_or_none({key: IndexedWriter(out, dtype) for key, out in zip(keys, outputs)}) as writers:
        for part, node, block in stream_ray(_encode_stream, calls, runner, "tokenize", node=here):
            if not nodes[part]:
                nodes[part] = node
                logger.bind(part=part, node=node).info("tokenize part {} of {}: rows [{}, {}) on Ray node {}", part,
                                                       jobs, bounds[part], bounds[part + 1], node)
            for key, (values, lengths, docs) in zip(keys, block):
                writers[key].add_block(values, lengths, docs)
            documents[part] += len(block[0][2])
        for part in np.flatnonzero(documents != np.diff(bounds)):  # a part that came back short is never written
            raise StableDatasetsError(f"tokenize part {part} of {jobs} (rows [{bounds[part]}, {bounds[part + 1]}), "
                                      f"node {nodes[part] or 'unknown'}) returned {documents[part]} documents for "
                                      f"{bounds[part + 1] - bounds[part]} rows; nothing was written")


def _ray_calls(ray: Any, dataset: StableDataset, keys: list[str], spec: Any, bounds: list[int], append_eod: bool,
               dtype: np.dtype, here: str | None) -> list[tuple[Any, ...]]:
    """Each range's task arguments. Its rows: the dataset itself (put once; the task reads its range) when every
    node can read it (a cache on an object store: each node fetches it into its own shard cache) or the tasks run
    on this node (`here`); else, a cache on this disk only, the range's rows as Arrow IPC streams put in Ray's
    object store a batch at a time (spilled to this node's disk when larger than the store), which the task
    fetches one at a time."""
    readable = here is not None or all(getattr(b, "origin", None) is not None for b in dataset.backends)
    whole = ray.put(dataset.select_columns(keys)) if readable else None
    calls = []
    for part, (start, stop) in enumerate(itertools.pairwise(bounds)):
        rows = whole if readable else [ray.put(_ipc(table)) for _, table in _batches(dataset, keys, start, stop)]
        calls.append((rows, keys, spec, part, len(bounds) - 1, start, stop, append_eod, dtype.str))
    return calls


def _ipc(table: pa.Table) -> pa.Buffer:
    """`table` as an Arrow IPC stream: pickling a slice of a table would carry its whole buffers."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _encode_stream(rows: Any, keys: list[str], spec: TokenizerSpec, part: int, parts: int, start: int, stop: int,
                   append_eod: bool, dtype: str) -> Iterator[list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """A Ray task: rows [start, stop) (of a dataset, or shipped as IPC streams) tokenized a batch at a time, each
    batch yielded as [(token ids as `dtype`, sequence lengths, sequences per document) for each key]. An error
    names the part, its rows and the node."""
    where = f"tokenize part {part} of {parts} (rows [{start}, {stop}), node {ray_node_id() or 'unknown'})"
    try:
        tokenizer = spec.load()
        eod = spec.eod if append_eod else None
        batches = _batches(rows, keys, start, stop) if isinstance(rows, StableDataset) else _shipped(rows, start)
        for first, table in batches:
            blocks = [encode_column(table.column(key), tokenizer, eod, key, first) for key in keys]
            yield [(fit_tokens(values, dtype), lengths, documents) for values, lengths, documents in blocks]
    except PreprocessError as exc:
        raise PreprocessError(f"{where}: {exc}") from None
    except Exception as exc:
        raise StableDatasetsError(f"{where}: {type(exc).__name__}: {exc}") from None


def _shipped(refs: list[Any], start: int) -> Iterator[tuple[int, pa.Table]]:
    get = import_ray().get
    row = start
    for ref in refs:
        table = pa.ipc.open_stream(get(ref)).read_all()
        yield row, table
        row += table.num_rows


def _batches(dataset: StableDataset, keys: list[str], start: int, stop: int) -> Iterator[tuple[int, pa.Table]]:
    part = dataset.select_columns(keys).select(range(start, stop)) if (start, stop) != (0, len(dataset)) \
        else dataset.select_columns(keys)
    row = start
    for table in part.with_format("arrow").iter(batch_size=BATCH_ROWS):
        yield row, table
        row += table.num_rows


def encode_column(column: pa.ChunkedArray | pa.Array, tokenizer: Any, eod: int | None, key: str = "text",
                  first_row: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(token ids back to back, tokens per sequence, sequences per document) of one batch of a text column, as
    Megatron-LM's Encoder.encode makes them: a string is one sentence, a list of strings one sentence each;
    sentences without tokens are dropped; `eod` goes after the last sentence of a document that has tokens."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if column.null_count:
        row = first_row + int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
        raise PreprocessError(f"--json-keys {key}: row {row} has no text (null)")
    documents = len(column)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        texts = column.to_pylist()
        owner = np.arange(documents)
    elif (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)) and \
            (pa.types.is_string(column.type.value_type) or pa.types.is_null(column.type.value_type)):
        texts = column.values.slice(column.offsets[0].as_py(),
                                    column.offsets[-1].as_py() - column.offsets[0].as_py()).to_pylist()
        owner = np.repeat(np.arange(documents), np.diff(column.offsets.to_numpy()))
        if None in texts:
            raise PreprocessError(f"--json-keys {key}: a sentence of row {first_row + int(owner[texts.index(None)])} "
                                  f"is null")
    else:
        raise PreprocessError(f"--json-keys {key}: holds {column.type}, not text or a list of texts")
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)  # the same ids, no character offsets
    ids = [encoding.ids for encoding in encode(texts, add_special_tokens=True)]
    lengths = np.fromiter(map(len, ids), np.int64, len(ids))
    values = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(lengths.sum()))
    kept = lengths > 0
    sequence_lengths, sequence_owner = lengths[kept], owner[kept]
    if eod is not None and len(sequence_lengths):
        last = np.append(sequence_owner[1:] != sequence_owner[:-1], True)  # the last sentence of each document
        values = np.insert(values, np.cumsum(sequence_lengths)[last], eod)
        sequence_lengths = sequence_lengths + last
    return values, sequence_lengths, np.bincount(sequence_owner, minlength=documents)


# -- the command ------------------------------------------------------------------------------------------------
def add_preprocess_arguments(parser: argparse.ArgumentParser) -> None:
    """Megatron-LM's preprocess_data.py arguments (those that change the output), plus `--tokenizer`."""
    parser.add_argument("--input", required=True, help="JSON Lines or Parquet files (a path, a glob, an s3:// URL), "
                                                       "or any load_dataset source (a builder name or folder)")
    parser.add_argument("--json-keys", nargs="+", default=["text"], help="columns to tokenize, one output each")
    parser.add_argument("--tokenizer", help="a tokenizer.json file, a folder holding one (with its "
                                            "tokenizer_config.json), or a Hugging Face tokenizer name")
    parser.add_argument("--tokenizer-type", help="Megatron-LM's: only HuggingFaceTokenizer (with --tokenizer-model)")
    parser.add_argument("--tokenizer-model", help="Megatron-LM's name for --tokenizer")
    parser.add_argument("--eod-id", type=int, help="the end-of-document id (default: the tokenizer's eos token)")
    parser.add_argument("--append-eod", action="store_true", help="append the end-of-document id to each document")
    parser.add_argument("--output-prefix", required=True, help="writes {prefix}_{key}_document.bin/.idx")
    parser.add_argument("--workers", type=int, default=1, help="processes tokenizing in parallel")
    parser.add_argument("--engine", default="process", choices=["process", "ray"],
                        help="tokenize the ranges in forked processes or as Ray tasks (on any nodes: parts "
                             "come back through the object store)")
    parser.add_argument("--address", help="the Ray cluster to use (default: $RAY_ADDRESS, else a local one)")
    parser.add_argument("--split", default="train", help="the split of a load_dataset source")
    parser.add_argument("--split-sentences", action="store_true", help="Megatron-LM's NLTK splitting: not supported")
    parser.add_argument("--partitions", type=int, default=1, help="Megatron-LM's; only 1 (the input order is kept)")
    parser.add_argument("--log-interval", type=int, default=1000, help="accepted for Megatron-LM's command lines")


def run_preprocess(args: argparse.Namespace, load: Callable[..., StableDataset]) -> list[str]:
    """The command: resolve the input with `load` (the front door's load_dataset), tokenize, merge."""
    if args.split_sentences:
        raise PreprocessError("--split-sentences (NLTK punkt) is not supported; pass pre-split sentences as a list "
                              "of strings per row: each becomes one sequence, as in Megatron-LM")
    if args.partitions != 1:
        raise PreprocessError("--partitions other than 1 reorders documents in Megatron-LM; use --workers")
    if args.tokenizer_type not in (None, "HuggingFaceTokenizer"):
        raise PreprocessError(f"--tokenizer-type {args.tokenizer_type}: only HuggingFaceTokenizer (a tokenizers "
                              "tokenizer.json) is supported; pass --tokenizer")
    source = args.tokenizer or args.tokenizer_model
    if not source:
        raise PreprocessError("--tokenizer (or --tokenizer-model) is required")
    if args.workers < 1:
        raise PreprocessError(f"--workers must be at least 1, got {args.workers}")
    if args.engine == "ray":  # an address nobody answers fails here, before the input is read into a cache
        ensure_ray(args.address)
    spec, vocab = tokenizer_spec(source, args.eod_id)
    dataset = open_input(args.input, load, args.workers, args.split)
    return preprocess(dataset, args.json_keys, spec, args.output_prefix, vocab_size=vocab,
                      append_eod=args.append_eod, workers=args.workers, engine=args.engine,
                      ray_address=args.address)


def open_input(source: str, load: Callable[..., StableDataset], workers: int, split: str = "train") -> StableDataset:
    """JSON Lines / Parquet files through our loaders (cached as Arrow), anything else as a load_dataset source."""
    name = source.lower()
    loader = next((kind for suffix, kind in FILE_LOADERS.items() if name.endswith(suffix)), None)
    if loader is not None:
        return load(loader, data_files={"train": source}, split="train", num_proc=workers)
    return load(source, split=split, num_proc=workers)
