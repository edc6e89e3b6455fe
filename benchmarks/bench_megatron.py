"""`stable-datasets megatron-preprocess` against Megatron-LM's own `tools/preprocess_data.py`, same JSONL, same
tokenizer, same flags, each in its own process on this machine; the output bytes are compared.

Megatron-LM's script is run from its source (a checkout, or the git mirror `fetch` makes), unchanged except for
its two imports of Megatron-LM's training stack, which do not import on a machine without GPUs (the package
`__init__` of megatron.core at Megatron-LM's head imports triton; `megatron.training` imports the whole trainer):
- `megatron.core.tokenizers...build_tokenizer` -> a shim with the same behaviour for `HuggingFaceTokenizer`:
  transformers' `AutoTokenizer` (as Megatron's wrapper loads it), `tokenize(text) = tokenizer(text).input_ids`,
  `eod` = the eos token's id, `vocab_size = len(tokenizer)`;
- `megatron.training.arguments._add_tokenizer_args` -> the two arguments the run uses.
Everything else (its Encoder, Pool.imap with chunksize 32, one `add_document` per document into megatron-core's
`IndexedDatasetBuilder`, from the installed megatron-core) is Megatron-LM's code as it is.

    python benchmarks/bench_megatron.py --mb 150 --workers 2 \\
        --megatron-lm /work/.mirror/NVIDIA+Megatron-LM/repo --side-packages /tmp/transformers-target

`--side-packages`: a folder holding transformers (`pip install --target DIR transformers`), appended to the
script's sys.path (not installed into the environment).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SHIM = '''"""Stand-ins for Megatron-LM's two training-stack imports (see benchmarks/bench_megatron.py)."""
import os
import sys

sys.path.extend(p for p in os.environ.get("BENCH_SIDE_PACKAGES", "").split(os.pathsep) if p)  # after the venv's
from transformers import AutoTokenizer  # noqa: E402


class HuggingFaceTokenizer:
    def __init__(self, path):
        self.tokenizer = AutoTokenizer.from_pretrained(pretrained_model_name_or_path=path, use_fast=True)

    def tokenize(self, text):
        return self.tokenizer(text).input_ids

    @property
    def eod(self):
        return self.tokenizer.convert_tokens_to_ids([self.tokenizer.eos_token])[0]

    @property
    def vocab_size(self):
        return len(self.tokenizer)


def build_tokenizer(args):
    assert args.tokenizer_type == "HuggingFaceTokenizer", args.tokenizer_type
    return HuggingFaceTokenizer(args.tokenizer_model)


def _add_tokenizer_args(parser):
    group = parser.add_argument_group(title="tokenizer")
    group.add_argument("--tokenizer-type", type=str, default=None)
    group.add_argument("--tokenizer-model", type=str, default=None)
    return parser
'''
IMPORTS = {
    "from megatron.core.tokenizers.utils.build_tokenizer import build_tokenizer": "from megatron_shim import "
                                                                                   "build_tokenizer",
    "from megatron.training.arguments import _add_tokenizer_args": "from megatron_shim import _add_tokenizer_args",
}


TOKENIZERS = {"bpe": "byte-level BPE (GPT-2's pre-tokenizer), 8,000 ids",
              "wordlevel": "WordLevel on whitespace and punctuation, 20,000 ids (cheap: the pipeline shows)"}


def make_tokenizer(folder: Path, kind: str) -> Path:
    """A tokenizer trained on Python's own documentation, saved as a tokenizer folder (tokenizer.json and a
    tokenizer_config.json naming its eos token, as transformers' AutoTokenizer reads it)."""
    import pydoc_data.topics

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = list(pydoc_data.topics.topics.values())
    special = ["<unk>", "<|endoftext|>"]
    if kind == "bpe":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8000, special_tokens=special,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    else:
        tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.train_from_iterator(texts, trainers.WordLevelTrainer(vocab_size=20_000, special_tokens=special))
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>", "unk_token": "<unk>"}))
    return folder


def make_jsonl(path: Path, megabytes: int, seed: int = 0) -> int:
    """Documents of 200-4,000 characters cut from Python's documentation, about `megabytes` MiB; the line count."""
    import pydoc_data.topics

    texts = list(pydoc_data.topics.topics.values())
    rnd = random.Random(seed)
    written = lines = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < megabytes << 20:
            text = rnd.choice(texts)
            start = rnd.randrange(max(1, len(text) - 1))
            line = json.dumps({"text": text[start:start + rnd.randrange(200, 4000)], "id": lines}) + "\n"
            fh.write(line)
            written += len(line)
            lines += 1
    return lines


def megatron_script(source: Path, work: Path) -> Path:
    """Megatron-LM's tools/preprocess_data.py with its two training-stack imports shimmed."""
    text = (source / "tools" / "preprocess_data.py").read_text() if (source / "tools").is_dir() else \
        subprocess.run(["git", f"--git-dir={source}", "show", "HEAD:tools/preprocess_data.py"], check=True,
                       capture_output=True, text=True).stdout
    for old, new in IMPORTS.items():
        if old not in text:
            raise SystemExit(f"Megatron-LM's preprocess_data.py no longer has {old!r}: update the shim")
        text = text.replace(old, new)
    (work / "megatron_shim.py").write_text(SHIM)
    script = work / "preprocess_data.py"
    script.write_text(text)
    return script


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=150)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tokenizer", choices=sorted(TOKENIZERS), default="bpe")
    parser.add_argument("--megatron-lm", type=Path, default=Path("/work/.mirror/NVIDIA+Megatron-LM/repo"),
                        help="a Megatron-LM checkout or its git directory")
    parser.add_argument("--side-packages", default="", help="a folder holding transformers (pip install --target)")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-megatron-"))
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tokenizer(work / "tokenizer", args.tokenizer)
    data = work / "corpus.jsonl"
    lines = make_jsonl(data, args.mb)
    size = data.stat().st_size
    script = megatron_script(args.megatron_lm, work)
    env = dict(os.environ, STABLE_DATASETS_DISABLE_PROGRESS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(work), str(REPO)])
    env["BENCH_SIDE_PACKAGES"] = args.side_packages
    flags = ["--input", str(data), "--json-keys", "text", "--append-eod", "--workers", str(args.workers)]
    theirs = timed([sys.executable, str(script), *flags, "--tokenizer-type", "HuggingFaceTokenizer",
                    "--tokenizer-model", str(tokenizer), "--output-prefix", str(work / "megatron")], env)
    ours = timed([sys.executable, "-m", "stable_datasets.cli", "megatron-preprocess", *flags, "--tokenizer",
                  str(tokenizer), "--output-prefix", str(work / "ours"), "--cache-dir", str(work / "cache")], env)
    warm = timed([sys.executable, "-m", "stable_datasets.cli", "megatron-preprocess", *flags, "--tokenizer",
                  str(tokenizer), "--output-prefix", str(work / "ours"), "--cache-dir", str(work / "cache")], env)
    same = all(filecmp.cmp(work / f"megatron_text_document{s}", work / f"ours_text_document{s}", shallow=False)
               for s in (".bin", ".idx"))
    print(f"input: {lines:,} documents, {size / 2**20:.0f} MiB JSONL; tokenizer: {TOKENIZERS[args.tokenizer]}; "
          f"--workers {args.workers}; {os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.1f}")
    print("| run | seconds | MiB/s | vs Megatron-LM |")
    print("|---|---:|---:|---:|")
    for name, seconds in (("Megatron-LM tools/preprocess_data.py", theirs),
                          ("stable-datasets megatron-preprocess (cold: JSONL read into its cache)", ours),
                          ("stable-datasets megatron-preprocess (warm: the JSONL's cache reused)", warm)):
        print(f"| {name} | {seconds:.1f} | {size / 2**20 / seconds:.1f} | {theirs / seconds:.2f}x |")
    print(f"identical .bin and .idx bytes: {same}")


if __name__ == "__main__":
    main()
