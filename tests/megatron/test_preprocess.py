"""`stable-datasets megatron-preprocess` writes the bytes Megatron-LM's tools/preprocess_data.py writes.

The oracle: Megatron-LM's Encoder.encode rules (json.loads each line; a text is one sentence, a list of texts one
each; `tokenizer(text).input_ids`, which for a tokenizers tokenizer is `encode(text, add_special_tokens=True)`;
sentences without tokens dropped; the eod after a document that has tokens) fed to megatron-core's own
`IndexedDatasetBuilder.add_document` with `DType.optimal_dtype(vocab_size)`, as the script does. (The script itself
imports Megatron-LM's training stack; benchmarks/bench_megatron.py runs its source on the same inputs and compares
the bytes too.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.cli import main
from stable_datasets.megatron import IndexedDataset
from stable_datasets.megatron.preprocess import PreprocessError, encode_column

LINES = ["the cat sat on the mat", "a dog and a cat", "", "the end of the story is near",
         "mat dog sat the the the", "on a", "end"]


def word_level(bos: bool = False) -> Any:
    """A WordLevel tokenizer trained on a few lines; `bos`: its post-processor adds "<s>" (a special token)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(LINES, trainers.WordLevelTrainer(special_tokens=["<unk>", "<s>", "</s>"]))
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tok


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """`word_level()` saved as tokenizer.json, with a tokenizer_config.json naming its eos token."""
    tok = word_level()
    folder = tmp_path_factory.mktemp("tok")
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    return folder


@pytest.fixture(scope="module")
def megatron():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import indexed_dataset
    return indexed_dataset


def megatron_lm_output(lines: list[str], keys: list[str], tokenizer_dir: Path, prefix: Path, megatron,
                       append_eod: bool = True) -> None:
    """What Megatron-LM's preprocess_data.py writes for these JSON lines (its Encoder rules, megatron-core's
    builder)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    eod = tok.token_to_id("</s>")
    dtype = megatron.DType.optimal_dtype(tok.get_vocab_size(with_added_tokens=True))
    builders = {k: megatron.IndexedDatasetBuilder(f"{prefix}_{k}_document.bin", dtype=dtype) for k in keys}
    for line in lines:
        data = json.loads(line)
        for key in keys:
            sentences = data[key] if isinstance(data[key], list) else [data[key]]
            doc_ids, lens = [], []
            for sentence in sentences:
                ids = tok.encode(sentence).ids
                if ids:
                    doc_ids.extend(ids)
                    lens.append(len(ids))
            if doc_ids and append_eod:
                doc_ids.append(eod)
                lens[-1] += 1
            builders[key].add_document(doc_ids, lens)
    for key in keys:
        builders[key].finalize(f"{prefix}_{key}_document.idx")


def _jsonl(path: Path, rows: list[dict]) -> list[str]:
    lines = [json.dumps(r) for r in rows]
    path.write_text("".join(line + "\n" for line in lines))
    return lines


def _same_files(a: str, b: str) -> None:
    for suffix in (".bin", ".idx"):
        assert Path(a + suffix).read_bytes() == Path(b + suffix).read_bytes(), suffix


#: "sentences" holds pre-split sentences (one sequence each in Megatron-LM), some without tokens
ROWS = [{"text": t, "sentences": [t[:7], "", t[7:]], "n": i} for i, t in enumerate(LINES)] + \
       [{"text": "zzz", "sentences": ["the cat", "", "sat on", "zzz"], "n": 99}]


@pytest.mark.parametrize("workers", [1, 3])
def test_same_bytes_as_megatron_lm_for_two_keys_empty_texts_and_sentence_lists(tmp_path, tokenizer_dir, megatron,
                                                                               workers):
    lines = _jsonl(tmp_path / "in.jsonl", ROWS)
    megatron_lm_output(lines, ["text", "sentences"], tokenizer_dir, tmp_path / "theirs", megatron)
    code = main(["megatron-preprocess", "--input", str(tmp_path / "in.jsonl"), "--json-keys", "text", "sentences",
                 "--tokenizer", str(tokenizer_dir), "--output-prefix", str(tmp_path / "ours"), "--append-eod",
                 "--workers", str(workers)])
    assert code == 0
    for key in ("text", "sentences"):
        _same_files(f"{tmp_path}/ours_{key}_document", f"{tmp_path}/theirs_{key}_document")
    ours = IndexedDataset(tmp_path / "ours_text_document")
    assert ours.dtype == np.uint16 and ours.document_count == len(ROWS)
    assert ours.document_indices.tolist()[2:4] == [2, 2]  # the empty text: a document of no sequence
    assert ours[len(ours) - 1].tolist() == [0, 2]  # "zzz": <unk>, the eod
    sentences = IndexedDataset(tmp_path / "ours_sentences_document")
    assert sentences.document_indices.tolist()[-2:] == [len(sentences) - 3, len(sentences)]  # 3 of 4 have tokens
    assert sentences.sequence_lengths.tolist()[-3:] == [2, 2, 2]  # "the cat", "sat on", "<unk> </s>"
    assert not list(tmp_path.glob(".megatron-parts-*"))  # the parts are gone


def test_special_tokens_of_the_post_processor_are_kept_as_transformers_adds_them():
    import pyarrow as pa

    tok = word_level(bos=True)
    values, lengths, documents = encode_column(pa.array(["the cat", "", "zzz"]), tok, 2)
    assert values.tolist() == [1, *tok.encode("the cat", add_special_tokens=False).ids, 2, 1, 2, 1, 0, 2]
    assert lengths.tolist() == [4, 2, 3] and documents.tolist() == [1, 1, 1]  # "" is "<s>": not empty


def test_megatron_lm_argument_names_and_parquet_input_without_eod(tmp_path, tokenizer_dir, megatron):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [r["text"] for r in ROWS[:-1]]
    pq.write_table(pa.table({"text": texts}), tmp_path / "in.parquet", row_group_size=2)
    megatron_lm_output([json.dumps({"text": t}) for t in texts], ["text"], tokenizer_dir, tmp_path / "theirs",
                       megatron, append_eod=False)
    assert main(["megatron-preprocess", "--input", str(tmp_path / "in.parquet"), "--tokenizer-type",
                 "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer_dir / "tokenizer.json"),
                 "--output-prefix", str(tmp_path / "ours"), "--workers", "2"]) == 0
    _same_files(f"{tmp_path}/ours_text_document", f"{tmp_path}/theirs_text_document")


def test_jsonl_in_an_object_store(tmp_path, tokenizer_dir, megatron, s3_env):
    lines = [json.dumps(r) for r in ROWS]
    s3_env.write("raw/in.jsonl", "".join(line + "\n" for line in lines).encode())
    megatron_lm_output(lines, ["text"], tokenizer_dir, tmp_path / "theirs", megatron)
    assert main(["megatron-preprocess", "--input", f"s3://{s3_env.bucket}/raw/in.jsonl", "--tokenizer",
                 str(tokenizer_dir), "--output-prefix", str(tmp_path / "ours"), "--append-eod", "--workers", "2",
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    _same_files(f"{tmp_path}/ours_text_document", f"{tmp_path}/theirs_text_document")


def test_a_load_dataset_source(tmp_path, tokenizer_dir, megatron):
    import stable_datasets as sds

    folder = tmp_path / "data"
    folder.mkdir()
    lines = _jsonl(folder / "train.jsonl", ROWS[:-1])
    megatron_lm_output(lines, ["text"], tokenizer_dir, tmp_path / "theirs", megatron)
    from stable_datasets.megatron.preprocess import open_input, preprocess, tokenizer_spec

    spec, vocab = tokenizer_spec(str(tokenizer_dir))
    preprocess(open_input(str(folder), sds.load_dataset, 1), ["text"], spec, str(tmp_path / "ours"),
               vocab_size=vocab, append_eod=True, workers=2)
    _same_files(f"{tmp_path}/ours_text_document", f"{tmp_path}/theirs_text_document")


def test_bad_inputs_are_named(tmp_path, tokenizer_dir, capsys):
    _jsonl(tmp_path / "in.jsonl", [{"text": "a cat"}, {"text": None}])
    args = ["megatron-preprocess", "--input", str(tmp_path / "in.jsonl"), "--tokenizer", str(tokenizer_dir),
            "--output-prefix", str(tmp_path / "out"), "--workers", "1"]
    assert main(args) == 1
    assert "--json-keys text: row 1 has no text (null)" in capsys.readouterr().err
    assert main([*args, "--json-keys", "body"]) == 1
    assert "--json-keys ['body'] not in the input" in capsys.readouterr().err
    assert main([*args[:4], str(tmp_path / "nope.json"), *args[5:]]) == 1
    assert "no tokenizer.json there" in capsys.readouterr().err
    assert not list(tmp_path.glob("out*"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(LINES), st.lists(st.sampled_from([*LINES, "zzz"]), max_size=4)),
                min_size=1, max_size=12), st.booleans())
def test_a_batch_encodes_as_megatron_lm_encodes_each_document(tokenizer_dir, docs, eod):
    import pyarrow as pa
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    column = pa.array(docs) if all(isinstance(d, str) for d in docs) else \
        pa.array([d if isinstance(d, list) else [d] for d in docs], type=pa.list_(pa.string()))
    values, lengths, documents = encode_column(column, tok, 2 if eod else None)
    flat, seqs, counts = [], [], []
    for doc in docs:
        ids = [tok.encode(s).ids for s in (doc if isinstance(doc, list) else [doc])]
        ids = [i for i in ids if i]
        if ids and eod:
            ids[-1] = [*ids[-1], 2]
        flat += [t for i in ids for t in i]
        seqs += [len(i) for i in ids]
        counts.append(len(ids))
    assert values.tolist() == flat and lengths.tolist() == seqs and documents.tolist() == counts


def test_options_megatron_lm_has_that_would_change_the_order_are_refused(tmp_path, tokenizer_dir, capsys):
    _jsonl(tmp_path / "in.jsonl", ROWS[:2])
    base = ["megatron-preprocess", "--input", str(tmp_path / "in.jsonl"), "--tokenizer", str(tokenizer_dir),
            "--output-prefix", str(tmp_path / "out"), "--workers", "1"]
    assert main([*base, "--partitions", "2"]) == 1
    assert "--partitions other than 1" in capsys.readouterr().err
    with pytest.raises(PreprocessError, match="--split-sentences"):
        main([*base, "--split-sentences", "--debug"])


@pytest.fixture
def no_ray_yet():
    """No Ray in this process before the test (what it uses is the local cluster `--engine ray` starts itself), and
    none left after it."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized() or os.environ.get("RAY_ADDRESS"):
        pytest.skip("this process is connected to a Ray cluster already")
    yield ray
    ray.shutdown()


@pytest.mark.cluster
@pytest.mark.xdist_group("ray")  # one Ray cluster at a time, in one xdist worker
def test_the_ray_engine_writes_the_bytes_of_the_process_engine(tmp_path, tokenizer_dir, no_ray_yet):
    """`--engine ray --workers 2`: the two ranges tokenized as Ray tasks (a local one-node cluster) give the files
    the default engine gives, whichever task finishes first."""
    _jsonl(tmp_path / "in.jsonl", ROWS * 3)
    base = ["megatron-preprocess", "--input", str(tmp_path / "in.jsonl"), "--json-keys", "text", "sentences",
            "--tokenizer", str(tokenizer_dir), "--append-eod", "--workers", "2", "--cache-dir", str(tmp_path / "c")]
    assert main([*base, "--output-prefix", str(tmp_path / "forked")]) == 0
    assert not no_ray_yet.is_initialized()
    assert main([*base, "--output-prefix", str(tmp_path / "ray"), "--engine", "ray"]) == 0
    assert no_ray_yet.is_initialized()  # the ranges ran on Ray
    for key in ("text", "sentences"):
        _same_files(f"{tmp_path}/ray_{key}_document", f"{tmp_path}/forked_{key}_document")
    assert IndexedDataset(tmp_path / "ray_text_document").document_count == 3 * len(ROWS)
    assert not list(tmp_path.glob(".megatron-parts-*"))


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_ray_address_nobody_answers_fails_at_once_naming_it(tmp_path, tokenizer_dir, how):
    """`--engine ray --address` (or $RAY_ADDRESS) that refuses connections: the error load_dataset's engine="ray"
    gives, on one line, before the input is read, and no output (a subprocess: no Ray cluster of this one's)."""
    pytest.importorskip("ray")
    _jsonl(tmp_path / "in.jsonl", ROWS)
    address = {"argument": "127.0.0.1:1", "environment": "ray://127.0.0.1:1"}[how]
    args = ["megatron-preprocess", "--input", str(tmp_path / "in.jsonl"), "--tokenizer", str(tokenizer_dir),
            "--output-prefix", str(tmp_path / "out"), "--workers", "2", "--engine", "ray",
            "--cache-dir", str(tmp_path / "c"), *(["--address", address] if how == "argument" else [])]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    if how == "environment":
        env["RAY_ADDRESS"] = address
    script = f"from stable_datasets.cli import main; raise SystemExit(main({args!r}))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    source = "$RAY_ADDRESS" if how == "environment" else "ray_address"
    assert out.returncode == 1, out.stderr[-3000:]
    assert out.stderr.splitlines()[-1].startswith(f"stable-datasets: cannot reach the Ray cluster at {address} "
                                                  f"({source}): Connection refused; give the head node's address"), \
        out.stderr[-3000:]
    assert not list(tmp_path.glob("out*")) and not (tmp_path / "c").exists()


def test_eod_id_sets_the_end_of_document_id(tmp_path, tokenizer_dir):
    """docs/megatron.md: `--eod-id` sets the id appended by `--append-eod` (default: the configured eos token)."""
    _jsonl(tmp_path / "in.jsonl", [{"text": "the cat"}, {"text": "a dog"}])
    args = ["megatron-preprocess", "--input", str(tmp_path / "in.jsonl"), "--json-keys", "text", "--tokenizer",
            str(tokenizer_dir), "--append-eod", "--workers", "1"]
    assert main([*args, "--output-prefix", str(tmp_path / "default")]) == 0
    assert main([*args, "--output-prefix", str(tmp_path / "set"), "--eod-id", "7"]) == 0
    default, chosen = IndexedDataset(tmp_path / "default_text_document"), IndexedDataset(tmp_path / "set_text_document")
    eos = word_level().token_to_id("</s>")
    assert [default[i].tolist()[-1] for i in range(2)] == [eos, eos]
    assert [chosen[i].tolist() for i in range(2)] == [[*default[i].tolist()[:-1], 7] for i in range(2)]
