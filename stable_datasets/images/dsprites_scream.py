"""dSprites on The Scream (Locatello et al., 2019): each image a random 64x64 patch of Munch's The Scream (resized
to 350x274), with the shape's pixels inverted; 64x64 RGB. The painting is upstream's own copy
(docs/source/datasets/imgs/scream.png, at a fixed commit of its repository, sha256 computed from that blob). The
patch positions are drawn per row from a seeded generator (see stable_datasets.images._dsprites): upstream's
are unseeded."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DownloadInfo
from stable_datasets.errors import missing_extra
from stable_datasets.features import Features, Image
from stable_datasets.images import _dsprites

SCREAM = DownloadInfo("https://raw.githubusercontent.com/galilai-group/stable-datasets/"
                      "f38ac71a1ef3c97be034dbbf51861e66909122b3/docs/source/datasets/imgs/scream.png",
                      checksum="sha256:e923d1e8742ecc794272c4950da635daeb75011db07d951304c9ea12226fc33c",
                      filename="scream.png", size=483459)
#: the painting's size once resized, (width, height), as upstream's
_SCREAM_SIZE = (350, 274)


class DSpritesScream(CatalogBuilder):
    """Scream dSprites: upstream's columns, the image a Scream patch with the shape inverted."""

    VERSION = Version("1.0.0")
    TASK = "disentangled representation learning"
    EXTRA = "formats"
    SOURCE = _dsprites.source(_dsprites.BETA_VAE_CITATION, scream=SCREAM)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="dSprites on patches of The Scream, the shape's pixels inverted (64x64 RGB). Random patch "
                        "positions are seeded per row, so every build gives the same rows.",
            features=Features({"image": Image(), **_dsprites.factor_features()}),
            supervised_keys=("image", "label"),
            num_examples=_dsprites.NUM_EXAMPLES,
        )

    def _split_generators(self, dl_manager):
        paths = dl_manager.download(self._source().remote_files())
        return [SplitGenerator("train", {"data_path": paths["train"], "scream_path": paths["scream"]})]

    def _generate_examples(self, data_path, scream_path):
        scream = _load_scream(scream_path)
        rows, cols = scream.shape[0] - 64, scream.shape[1] - 64
        for start, images, classes, values in _dsprites.iter_blocks(data_path):
            for offset, (row_classes, row_values) in enumerate(zip(classes.tolist(), values.tolist())):
                index = start + offset
                rng = _dsprites.row_rng(index)
                top, left = int(rng.integers(0, rows)), int(rng.integers(0, cols))
                patch = scream[top:top + 64, left:left + 64].copy()
                mask = images[offset] == 1
                patch[mask] = 1.0 - patch[mask]
                image = (patch * 255).astype(np.uint8)
                yield index, {"image": image, **_dsprites.factor_columns(index, row_classes, row_values)}


def _load_scream(path: str) -> np.ndarray:
    """The painting as float32 RGB in [0, 1], resized to 350x274 with Pillow's default filter, as upstream's."""
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise missing_extra(f"reading {path} (the Scream painting)", "pillow", "formats") from None
    with PILImage.open(path) as painting:
        resized = painting.convert("RGB").resize(_SCREAM_SIZE)
    return np.asarray(resized).astype(np.float32) / 255.0
