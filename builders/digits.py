"""scikit-learn's bundled handwritten digits: 1,797 real 8x8 grayscale images, labels 0-9.

The train/test split is a fixed permutation drawn from `seed`, so every machine builds the
same rows. Pixel values 0..16 are scaled to 0..255 and stored as PNG.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import stable_datasets as sds

CHUNKS = 8


@dataclass
class DigitsConfig(sds.BuilderConfig):
    test_fraction: float = 0.2
    seed: int = 0


class Digits(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")
    BUILDER_CONFIG_CLASS = DigitsConfig

    def _info(self) -> sds.DatasetInfo:
        return sds.DatasetInfo(
            description="Optical recognition of handwritten digits (UCI), as shipped with scikit-learn.",
            features=sds.Features({"image": sds.Image(), "label": sds.ClassLabel(names=[str(d) for d in range(10)])}),
            homepage="https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits",
            license="CC BY 4.0",
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager: sds.DownloadManager) -> list[sds.SplitGenerator]:
        # the rows in CHUNKS contiguous chunks: the list that num_proc divides among workers
        return [sds.SplitGenerator(sds.Split.TRAIN, {"split": "train", "chunks": list(range(CHUNKS))}),
                sds.SplitGenerator(sds.Split.TEST, {"split": "test", "chunks": list(range(CHUNKS))})]

    def _generate_examples(self, split: str, chunks: list[int]):
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            raise ImportError("the 'digits' builder needs scikit-learn: pip install 'stable-datasets[data]'") from None
        digits = load_digits()
        images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
        order = np.random.default_rng(self.config.seed).permutation(len(images))
        n_test = round(len(images) * self.config.test_fraction)
        chosen = np.sort(order[n_test:] if split == "train" else order[:n_test])
        bounds = np.linspace(0, len(chosen), CHUNKS + 1).round().astype(int)
        for index in np.concatenate([chosen[bounds[c]:bounds[c + 1]] for c in chunks]):
            yield int(index), {"image": images[index], "label": int(digits.target[index])}
