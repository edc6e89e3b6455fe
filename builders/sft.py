"""Chat SFT data from your own JSONL or Parquet files.

Each record is `{"messages": [{"role", "content"}, ...]}`, a `{"prompt", "response"}` pair, or
ShareGPT `{"conversations": [{"from", "value"}, ...]}`. `data_files` is a path, a list of paths
(the "train" split) or a dict of split -> path(s):

    sds.load_dataset("sft", split="train", data_files={"train": "chat.jsonl"},
                     storage_format="parquet", packing=PackingConfig(pack_size=4096))
"""

from __future__ import annotations

import json
from pathlib import Path

import stable_datasets as sds
from stable_datasets.builder.data_files import normalize_data_files
from stable_datasets.download.inputs import is_object_url
from stable_datasets.sft import ChatSFTBuilder


class Sft(ChatSFTBuilder):
    VERSION = sds.Version("1.0.0")

    def _description(self) -> str:
        return "Chat conversations for supervised fine-tuning, read from JSONL or Parquet files."

    def _split_generators(self, dl_manager):
        generators = []
        for split, paths in normalize_data_files(self.config.data_files, "sft",
                                                  input_options=self.input_storage_options).items():
            # object-store files stay URLs: each job copies the ones it reads on its own node (local_input)
            local = [p if Path(p).exists() or is_object_url(p) else str(dl_manager.download(p)) for p in paths]
            generators.append(sds.SplitGenerator(split, {"split": split, "files": local}))
        return generators

    def _conversations(self, split, files):
        for given in files:
            path = self.local_input(given)
            name = Path(path).name
            if path.endswith(".parquet"):
                import pyarrow.parquet as pq

                for number, record in enumerate(pq.read_table(path).to_pylist()):
                    yield f"{name}:{number}", record
                continue
            with open(path, encoding="utf-8") as fh:
                for number, line in enumerate(fh):
                    if line.strip():
                        try:
                            yield f"{name}:{number}", json.loads(line)
                        except ValueError as exc:
                            raise ValueError(f"{path}, line {number + 1}: not JSON ({exc})") from None
