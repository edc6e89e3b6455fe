"""dSprites on noise (Locatello et al., 2019): each dSprites shape white on a background of uniform noise in
[0, 1) drawn per pixel and channel; 64x64 RGB. The draws are seeded per row (see stable_datasets.images._dsprites):
upstream's are unseeded."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder
from stable_datasets.features import Features, Image
from stable_datasets.images import _dsprites


class DSpritesNoise(CatalogBuilder):
    """Noisy dSprites: upstream's columns, the image white shape on colour noise."""

    VERSION = Version("1.0.0")
    TASK = "disentangled representation learning"
    SOURCE = _dsprites.source(_dsprites.LOCATELLO_CITATION)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="dSprites with each shape white on uniform colour noise (64x64 RGB). Random draws are "
                        "seeded per row, so every build gives the same rows.",
            features=Features({"image": Image(), **_dsprites.factor_features()}),
            supervised_keys=("image", "label"),
            num_examples=_dsprites.NUM_EXAMPLES,
        )

    def _generate_examples(self, data_path, split):
        for start, images, classes, values in _dsprites.iter_blocks(data_path):
            shapes = images.astype(np.float32)
            for offset, (row_classes, row_values) in enumerate(zip(classes.tolist(), values.tolist())):
                index = start + offset
                noise = _dsprites.row_rng(index).uniform(0, 1, size=(64, 64, 3))
                image = (np.minimum(shapes[offset][..., None] + noise, 1.0) * 255).astype(np.uint8)
                yield index, {"image": image, **_dsprites.factor_columns(index, row_classes, row_values)}
