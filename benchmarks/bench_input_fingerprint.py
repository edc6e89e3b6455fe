"""Warm reuse with many input files: what re-running an unchanged load costs once inputs are fingerprinted.

    python benchmarks/bench_input_fingerprint.py --files 10000

Writes N one-line JSONL files, builds once from a glob over them, then times the second
`load_dataset` (a cache hit: glob, one stat per file, hash, open), in "stat" mode and in
"sha256" mode (the content hashes then come from the SQLite memo), and the fingerprint
alone. Hugging Face `datasets` reading the same files with its "json" loader is timed the
same way when it is installed (`--no-hf` to skip).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import best_of, print_table, quiet, work_dir

BUILDER = """
import json
import stable_datasets as sds
from stable_datasets.builder.data_files import normalize_data_files

class Many(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features=sds.Features({"text": sds.Value("string")}))

    def _split_generators(self, dl_manager):
        files = normalize_data_files(self.config.data_files, "many")
        return [sds.SplitGenerator(split, {"paths": paths}) for split, paths in files.items()]

    def _generate_examples(self, paths):
        for path in paths:
            with open(path) as fh:
                for number, line in enumerate(fh):
                    yield f"{path}:{number}", json.loads(line)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--no-hf", action="store_true")
    args = parser.parse_args()
    quiet()
    import stable_datasets as sds

    root = work_dir("bench-inputs-")
    data = root / "data"
    data.mkdir()
    for i in range(args.files):
        (data / f"part-{i:06d}.jsonl").write_text(json.dumps({"text": f"record {i}"}) + "\n")
    script = root / "many.py"
    script.write_text(textwrap.dedent(BUILDER))
    pattern = str(data / "*.jsonl")
    os.environ["STABLE_DATASETS_CACHE_DIR"] = str(root / "cache")

    rows = []
    for mode in ("stat", "sha256"):
        def load(mode: str = mode) -> int:
            return len(sds.load_dataset(str(script), split="train", data_files=pattern, input_identity=mode))

        assert load() == args.files  # the build (and, for sha256, the first hashing of every file)
        builder = sds.load_builder(str(script), data_files=pattern, input_identity=mode)
        rows.append((f"warm `load_dataset`, input_identity={mode!r}", f"{best_of(load, 5):.3f}"))
        rows.append((f"fingerprint alone, input_identity={mode!r}", f"{best_of(builder.fingerprint, 5):.3f}"))
    if not args.no_hf:
        try:
            import datasets
        except ImportError:
            datasets = None
        if datasets is not None:
            datasets.disable_progress_bars()
            hf_cache = str(root / "hf-cache")
            files = sorted(str(p) for p in data.glob("*.jsonl"))

            def hf_load() -> int:
                return len(datasets.load_dataset("json", data_files=files, split="train", cache_dir=hf_cache))

            assert hf_load() == args.files
            rows.append((f"Hugging Face datasets {datasets.__version__}: warm `load_dataset('json')`",
                         f"{best_of(hf_load, 3):.3f}"))
    print(f"{args.files:,} input files, one JSON line each; best of 5 (HF: best of 3)\n")
    print_table(["measure", "seconds"], rows, right=(1,))


if __name__ == "__main__":
    main()
