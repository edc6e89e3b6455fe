"""dSprites: 737,280 64x64 binary images of 2D shapes, every combination of 6 latent factors (color, shape, scale,
orientation, x and y position), from the official `.npz`, read a bounded block of rows at a time and never
unpickled. Pixels are 0 or 255, one channel (64, 64), as upstream's."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder
from stable_datasets.features import Features, Image
from stable_datasets.images import _dsprites


class DSprites(CatalogBuilder):
    """dSprites (Matthey et al., 2017); `label` holds the 6 factor indices, `label_values` their values."""

    VERSION = Version("1.0.0")
    TASK = "disentangled representation learning"
    SOURCE = _dsprites.source(_dsprites.BETA_VAE_CITATION)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="dSprites: procedurally generated 64x64 black-and-white images of 2D shapes with 6 known "
                        "independent factors: color (1), shape (3), scale (6), orientation (40), position X (32), "
                        "position Y (32).",
            features=Features({"image": Image(mode="L"), **_dsprites.factor_features()}),
            supervised_keys=("image", "label"),
            num_examples=_dsprites.NUM_EXAMPLES,
        )

    def _generate_examples(self, data_path, split):
        for start, images, classes, values in _dsprites.iter_blocks(data_path):
            pixels = images * 255
            for offset, (row_classes, row_values) in enumerate(zip(classes.tolist(), values.tolist())):
                index = start + offset
                yield index, {"image": pixels[offset], **_dsprites.factor_columns(index, row_classes, row_values)}
