"""Moving MNIST (Srivastava et al., 2015): the canonical test set of 10,000 sequences of 20 grayscale 64x64
frames, two digits moving in each. Rows hold each sequence as a (20, 64, 64, 1) uint8 array (upstream's
feature). The official `.npy` is (T=20, N, 64, 64): it is memory-mapped (no pickle) and read a block of sequences
at a time, never loaded whole. Not to be confused with the bundled `moving_digits` builder, which renders its own
videos from scikit-learn's digits."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Array4D, Features

FRAMES, SIDE = 20, 64
#: sequences copied out of the memory map per step (20 x 64 x 64 bytes each)
SEQUENCES_PER_READ = 256
#: sha256 and size from TFDS's url_checksums/moving_mnist.txt
_FILE = DownloadInfo("http://www.cs.toronto.edu/~nitish/unsupervised_video/mnist_test_seq.npy", size=819200096,
                     checksum="sha256:c2a3e8d3939c001ab77bf543f130157424efa486bb4d0974d2cebb773b13f8b3")


class MovingMNIST(CatalogBuilder):
    """Moving MNIST, the `test` split only (the conventional training data is generated, not downloaded)."""

    VERSION = Version("1.0.0")
    TASK = "video prediction"
    SOURCE = DatasetSource(
        homepage="http://www.cs.toronto.edu/~nitish/unsupervised_video/",
        assets={"test": _FILE},
        citation="""@inproceedings{srivastava2015unsupervised,
  title={Unsupervised Learning of Video Representations using LSTMs},
  author={Srivastava, Nitish and Mansimov, Elman and Salakhutdinov, Ruslan},
  booktitle={ICML},
  year={2015}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Moving MNIST test set: 10,000 sequences of 20 grayscale 64x64 frames of two MNIST digits "
                        "moving and bouncing; each row is a (20, 64, 64, 1) uint8 array.",
            features=Features({"video": Array4D(shape=(FRAMES, SIDE, SIDE, 1), dtype="uint8")}),
            supervised_keys=None,
            num_examples={"test": 10_000},
        )

    def _generate_examples(self, data_path, split):
        try:
            frames = np.load(data_path, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            raise StableDatasetsError(f"{data_path}: not a readable .npy array ({exc})") from None
        expected = (FRAMES, frames.shape[1] if frames.ndim == 4 else -1, SIDE, SIDE)
        if frames.dtype != np.uint8 or frames.shape != expected:
            raise StableDatasetsError(f"{data_path}: expected a uint8 array of shape ({FRAMES}, N, {SIDE}, {SIDE}), "
                                      f"got {frames.dtype} {frames.shape}")
        for start in range(0, frames.shape[1], SEQUENCES_PER_READ):
            block = np.ascontiguousarray(frames[:, start:start + SEQUENCES_PER_READ].transpose(1, 0, 2, 3))
            for offset, sequence in enumerate(block[..., None]):
                yield start + offset, {"video": sequence}
