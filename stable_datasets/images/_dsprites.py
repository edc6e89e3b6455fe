"""What the four dSprites datasets share (DSprites, DSpritesColor, DSpritesNoise, DSpritesScream): the official
`.npz`, read a bounded block of rows at a time (its pickled `metadata` member is never read), and the factor
columns of a row. A private helper (its name starts with `_`), not a dataset.

The coloured, noisy and Scream variants draw random numbers per image. Upstream draws them from numpy's global,
unseeded generator, so its rows differ from one build to the next; here each row's draws come from a generator
seeded by (SEED, the row's index): the same rows on every build, whatever the number of processes or the slice."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.npz import iter_npz_blocks
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Sequence, Value

#: no public record gives this file's sha256 or size (TFDS records the HDF5 copy only): downloaded unchecked
ARCHIVE = DownloadInfo("https://github.com/google-deepmind/dsprites-dataset/raw/refs/heads/master/"
                       "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz")
HOMEPAGE = "https://github.com/deepmind/dsprites-dataset"
LICENSE = "Apache-2.0"
NUM_EXAMPLES = {"train": 737_280}
#: the seed of the per-row random draws of the coloured, noisy and Scream variants
SEED = 0
FACTORS = ("color", "shape", "scale", "orientation", "posX", "posY")

BETA_VAE_CITATION = """@inproceedings{higgins2017beta,
  title={beta-VAE: Learning basic visual concepts with a constrained variational framework},
  author={Higgins, Irina and Matthey, Loic and Pal, Arka and Burgess, Christopher and Glorot, Xavier and Botvinick,
    Matthew and Mohamed, Shakir and Lerchner, Alexander},
  booktitle={International Conference on Learning Representations},
  year={2017}}"""
LOCATELLO_CITATION = """@inproceedings{locatello2019challenging,
  title={Challenging Common Assumptions in the Unsupervised Learning of Disentangled Representations},
  author={Locatello, Francesco and Bauer, Stefan and Lucic, Mario and Raetsch, Gunnar and Gelly, Sylvain and
    Sch{\\"o}lkopf, Bernhard and Bachem, Olivier},
  booktitle={International Conference on Machine Learning},
  pages={4114--4124},
  year={2019}}"""


def source(citation: str, **extra_assets: DownloadInfo) -> DatasetSource:
    return DatasetSource(homepage=HOMEPAGE, assets={"train": ARCHIVE, **extra_assets}, citation=citation,
                         license=LICENSE)


def factor_features() -> dict[str, Any]:
    """The columns every variant has besides `image`, in upstream's order (colorRGB is the coloured one's)."""
    return {"index": Value("int32"), "label": Sequence(Value("int32")), "label_values": Sequence(Value("float32")),
            **{name: Value("int32") for name in FACTORS},
            **{f"{name}Value": Value("float64") for name in FACTORS}}


def iter_blocks(path: str) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(first index, images (n, 64, 64) of 0/1, latents_classes (n, 6), latents_values (n, 6)) blocks."""
    start = 0
    for images, classes, values in iter_npz_blocks(path, ["imgs", "latents_classes", "latents_values"]):
        if images.shape[1:] != (64, 64) or classes.shape[1:] != (6,) or values.shape[1:] != (6,):
            raise StableDatasetsError(f"{path}: imgs {images.shape[1:]}, latents {classes.shape[1:]} and "
                                      f"{values.shape[1:]} a row; expected (64, 64), (6,) and (6,)")
        yield start, images, classes, values
        start += len(images)


def factor_columns(index: int, classes: list[int], values: list[float]) -> dict[str, Any]:
    """A row's columns besides its image."""
    return {"index": index, "label": classes, "label_values": values, **dict(zip(FACTORS, classes)),
            **{f"{name}Value": value for name, value in zip(FACTORS, values)}}


def row_rng(index: int) -> np.random.Generator:
    """The generator of row `index`'s random draws."""
    return np.random.default_rng([SEED, index])
