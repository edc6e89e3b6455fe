"""A generation-bound builder for build benchmarks: scikit-learn's real digits, each example
upscaled to 96x96, rotated and PNG-encoded in the generator (the CPU work per example that
parallel parts share out). `generate(chunks, examples)` is also handed to Hugging Face
`datasets` unchanged, so both sides run the same work per example."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

import stable_datasets as sds

CHUNKS = 16


def generate(chunks: list[int], examples: int, library_encodes: bool = False):
    """Examples with PNG bytes, or (library_encodes) with the uint8 array for the library to encode."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    bounds = np.linspace(0, examples, CHUNKS + 1).round().astype(int)
    for chunk in chunks:
        for n in range(bounds[chunk], bounds[chunk + 1]):
            big = cv2.resize(images[n % len(images)], (96, 96), interpolation=cv2.INTER_CUBIC)
            turn = cv2.getRotationMatrix2D((48, 48), (n * 7) % 31 - 15, 1.0)
            turned = cv2.warpAffine(big, turn, (96, 96))
            if library_encodes:
                yield n, {"image": turned, "label": int(digits.target[n % len(images)])}
                continue
            _, png = cv2.imencode(".png", turned, [cv2.IMWRITE_PNG_COMPRESSION, 9])
            yield n, {"image": png.tobytes(), "label": int(digits.target[n % len(images)])}


@dataclass
class DigitsPngConfig(sds.BuilderConfig):
    examples: int = 20000
    library_encodes: bool = False


class DigitsPng(sds.GeneratorBasedBuilder):
    BUILDER_CONFIG_CLASS = DigitsPngConfig

    def _info(self):
        return sds.DatasetInfo(features=sds.Features({
            "image": sds.Image(), "label": sds.ClassLabel(names=[str(d) for d in range(10)])}))

    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train", {"chunks": list(range(CHUNKS)), "examples": self.config.examples,
                                             "library_encodes": self.config.library_encodes})]

    def _generate_examples(self, chunks, examples, library_encodes):
        yield from generate(chunks, examples, library_encodes)
