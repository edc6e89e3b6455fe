"""dSprites in colour (Locatello et al., 2019): each dSprites shape drawn in a random colour, every channel scaled
by a factor drawn uniformly in [0.5, 1), on black; 64x64 RGB. The colour is the row's `colorRGB` column. The draws
are seeded per row (see stable_datasets.images._dsprites): upstream's are unseeded."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder
from stable_datasets.features import Features, Image, Sequence, Value
from stable_datasets.images import _dsprites


class DSpritesColor(CatalogBuilder):
    """Coloured dSprites: upstream's columns plus `colorRGB`, the shape's colour in [0.5, 1)."""

    VERSION = Version("1.0.0")
    TASK = "disentangled representation learning"
    SOURCE = _dsprites.source(_dsprites.LOCATELLO_CITATION)

    def _info(self) -> DatasetInfo:
        features = {}
        for name, feature in _dsprites.factor_features().items():
            features[name] = feature
            if name == "colorValue":  # upstream's order: the colour drawn right after the color factor's value
                features["colorRGB"] = Sequence(Value("float32"))
        return DatasetInfo(
            description="dSprites with each shape in a random colour on black (64x64 RGB); the colour is in "
                        "colorRGB. Random draws are seeded per row, so every build gives the same rows.",
            features=Features({"image": Image(), **features}),
            supervised_keys=("image", "label"),
            num_examples=_dsprites.NUM_EXAMPLES,
        )

    def _generate_examples(self, data_path, split):
        for start, images, classes, values in _dsprites.iter_blocks(data_path):
            shapes = images.astype(np.float32)
            for offset, (row_classes, row_values) in enumerate(zip(classes.tolist(), values.tolist())):
                index = start + offset
                color = _dsprites.row_rng(index).uniform(0.5, 1.0, size=(3,))
                image = ((shapes[offset][..., None] * color) * 255).astype(np.uint8)  # upstream's arithmetic
                yield index, {"image": image, "colorRGB": color.tolist(),
                              **_dsprites.factor_columns(index, row_classes, row_values)}
