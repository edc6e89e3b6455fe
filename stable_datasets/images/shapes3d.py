"""3D Shapes: 480,000 64x64 RGB renders of 3D shapes, every combination of 6 factors (floor hue 10, wall hue 10,
object hue 10, scale 8, shape 4, orientation 15) in row-major order, from DeepMind's official `3dshapes.h5`
(`images` (N, 64, 64, 3) uint8, `labels` (N, 6) float64), read a bounded block of rows at a time.

Upstream downloads an `.npz` copy of the same two arrays from Hugging Face; the official HDF5 file is read here,
with TFDS's record of its sha256 and size (none exists for the copy). Rows are upstream's: the factor values, and
each factor's index computed from the row's position in the product."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.hdf5 import iter_hdf5_blocks
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Features, Image, Sequence, Value

#: sha256 and size from TFDS's url_checksums/shapes3d.txt
_FILE = DownloadInfo("https://storage.googleapis.com/3d-shapes/3dshapes.h5",
                     checksum="sha256:0a0f6ed98baff276a50f3a081a7434d788da63cb135a98189b2a5b5769be1785",
                     size=267573662)
FACTORS = ("floor", "wall", "object", "scale", "shape", "orientation")
FACTOR_SIZES = np.array([10, 10, 10, 8, 4, 15])
#: rows per step of each factor in the row-major product: 48000, 4800, 480, 60, 15, 1
_BASES = np.cumprod(np.r_[1, FACTOR_SIZES[::-1]])[::-1][1:]


class Shapes3D(CatalogBuilder):
    """3D Shapes (Burgess and Kim, 2018): `label` holds the 6 factor values, `label_index` their indices."""

    VERSION = Version("1.0.0")
    TASK = "disentangled representation learning"
    EXTRA = "formats"
    SOURCE = DatasetSource(
        homepage="https://github.com/google-deepmind/3dshapes-dataset/",
        assets={"train": _FILE},
        citation="""@InProceedings{pmlr-v80-kim18b,
  title={Disentangling by Factorising},
  author={Kim, Hyunjik and Mnih, Andriy},
  booktitle={Proceedings of the 35th International Conference on Machine Learning},
  pages={2649--2658},
  year={2018},
  editor={Dy, Jennifer and Krause, Andreas},
  volume={80},
  series={Proceedings of Machine Learning Research},
  publisher={PMLR},
  url={https://proceedings.mlr.press/v80/kim18b.html}}""",
        license="Apache-2.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="3D Shapes: 64x64 RGB images of 3D shapes, every combination of 6 independent factors "
                        "(floor hue, wall hue, object hue, scale, shape, orientation), in row-major order.",
            features=Features({
                "image": Image(), "label": Sequence(Value("float64")), "label_index": Sequence(Value("int64")),
                **{name: Value("float64") for name in FACTORS},
                **{f"{name}_idx": Value("int32") for name in FACTORS},
            }),
            supervised_keys=("image", "label"),
            num_examples={"train": int(np.prod(FACTOR_SIZES))},
        )

    def _generate_examples(self, data_path, split):
        start = 0
        for images, labels in iter_hdf5_blocks(data_path, ["images", "labels"]):
            if images.shape[1:] != (64, 64, 3) or labels.shape[1:] != (6,):
                raise StableDatasetsError(f"{data_path}: images {images.shape[1:]} and labels {labels.shape[1:]} a "
                                          "row, expected (64, 64, 3) and (6,)")
            indices = (np.arange(start, start + len(images))[:, None] // _BASES) % FACTOR_SIZES
            for offset, (values, index) in enumerate(zip(labels.tolist(), indices.tolist())):
                yield start + offset, {"image": images[offset], "label": values, "label_index": index,
                                       **dict(zip(FACTORS, values)),
                                       **{f"{name}_idx": i for name, i in zip(FACTORS, index)}}
            start += len(images)
