"""MNIST handwritten digits (60,000 train / 10,000 test, 28x28 grayscale), from the IDX files."""

from __future__ import annotations

import gzip
import struct

import numpy as np

import stable_datasets as sds

_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"
_FILES = {
    "train_images": ("train-images-idx3-ubyte.gz", "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
    "train_labels": ("train-labels-idx1-ubyte.gz", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
    "test_images": ("t10k-images-idx3-ubyte.gz", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
    "test_labels": ("t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"),
}


def read_idx(path) -> np.ndarray:
    """Read a (gzipped) IDX file: magic 0x0000 08 <ndim>, big-endian dims, uint8 data."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        data = fh.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not a uint8 IDX file (magic {data[:4].hex()})")
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(dims)):
        raise ValueError(f"{path}: header says {dims} but holds {array.size} bytes of data")
    return array.reshape(dims)


class Mnist(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")

    def _info(self) -> sds.DatasetInfo:
        return sds.DatasetInfo(
            description="The MNIST database of handwritten digits.",
            features=sds.Features({"image": sds.Image(), "label": sds.ClassLabel(names=[str(d) for d in range(10)])}),
            homepage="https://yann.lecun.com/exdb/mnist/",
            citation="LeCun, Y., Cortes, C. and Burges, C. J. C. The MNIST database of handwritten digits.",
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager: sds.DownloadManager) -> list[sds.SplitGenerator]:
        files = dl_manager.download({key: sds.RemoteFile(_URL + name, sha256=sha, mirrors=(_MIRROR + name,))
                                     for key, (name, sha) in _FILES.items()})
        return [
            sds.SplitGenerator(sds.Split.TRAIN, {"images": files["train_images"], "labels": files["train_labels"]}),
            sds.SplitGenerator(sds.Split.TEST, {"images": files["test_images"], "labels": files["test_labels"]}),
        ]

    def _generate_examples(self, images, labels):
        pixels, targets = read_idx(images), read_idx(labels)
        if len(pixels) != len(targets):
            raise ValueError(f"{images} has {len(pixels)} images but {labels} has {len(targets)} labels")
        for index in range(len(pixels)):
            yield index, {"image": pixels[index], "label": int(targets[index])}
