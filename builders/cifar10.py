"""CIFAR-10 (50,000 train / 10,000 test, 32x32 RGB, 10 classes) from the binary archive.

The binary version is used on purpose: the "python" version is pickled, and a dataset
library should not unpickle files from the internet.
"""

from __future__ import annotations

import numpy as np

import stable_datasets as sds

_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"
_SHA256 = "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"
_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
_RECORD = 1 + 3 * 32 * 32
_SPLIT_FILES = {"train": [f"data_batch_{i}.bin" for i in range(1, 6)], "test": ["test_batch.bin"]}


class Cifar10(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")

    def _info(self) -> sds.DatasetInfo:
        return sds.DatasetInfo(
            description="CIFAR-10: 60,000 32x32 colour images in 10 classes.",
            features=sds.Features({"image": sds.Image(), "label": sds.ClassLabel(names=_NAMES)}),
            homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
            citation="Krizhevsky, A. Learning Multiple Layers of Features from Tiny Images. 2009.",
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager: sds.DownloadManager) -> list[sds.SplitGenerator]:
        archive = dl_manager.download(sds.RemoteFile(_URL, sha256=_SHA256))
        return [sds.SplitGenerator(split, {"archive": archive, "files": files, "dl_manager": dl_manager})
                for split, files in _SPLIT_FILES.items()]

    def _generate_examples(self, archive, files, dl_manager):
        wanted = set(files)
        found = set()
        for member, fh in dl_manager.iter_archive(archive):
            name = member.rsplit("/", 1)[-1]
            if name not in wanted:
                continue
            found.add(name)
            records = np.frombuffer(fh.read(), dtype=np.uint8)
            if records.size % _RECORD:
                raise ValueError(f"{archive}:{member} is not a whole number of {_RECORD}-byte records")
            records = records.reshape(-1, _RECORD)
            images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
            for index, (label, image) in enumerate(zip(records[:, 0], images)):
                yield f"{name}:{index}", {"image": image, "label": int(label)}
        missing = wanted - found
        if missing:
            raise ValueError(f"{archive} lacks {sorted(missing)}")
