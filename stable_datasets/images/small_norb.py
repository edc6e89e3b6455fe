"""smallNORB: 96x96 grayscale stereo pairs of 50 toys (5 categories x 10 instances) under 6 lightings, 9 elevations
and 18 azimuths, 24,300 pairs train / 24,300 test, from the official gzipped files on cs.nyu.edu.

Upstream downloads a zip of the same three files per split from a Hugging Face copy; the official files are
read here, with TFDS's record of their sha256 and size. Each is a NORB binary matrix (little-endian int32 magic,
rank, dimensions, then the data); the images (`-dat`, (N, 2, 96, 96) bytes) are read from the gzip stream a
bounded block of pairs at a time. Rows are upstream's: the azimuth is the file's value / 2 (0-17)."""

from __future__ import annotations

import gzip
import struct
from typing import IO

import numpy as np

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Features, Image, Sequence, Value

_BASE = "https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/"
#: (split, part) -> (file, sha256, size), from TFDS's url_checksums/smallnorb.txt
_FILES = {
    ("train", "dat"): ("smallnorb-5x46789x9x18x6x2x96x96-training-dat.mat.gz",
                       "5ffd6272a07d32695ee1082a26a41a93a37aab8c28da047f8c34ed348d214873", 131896188),
    ("train", "cat"): ("smallnorb-5x46789x9x18x6x2x96x96-training-cat.mat.gz",
                       "2784e542c1922060691090952b6cd6278879a216c90f81476f0f00256d42cdaa", 348),
    ("train", "info"): ("smallnorb-5x46789x9x18x6x2x96x96-training-info.mat.gz",
                        "de7eb932ebe7a4ee16217fead60660d0eb3d23632c2f4d1c51f88c501c17bf32", 71052),
    ("test", "dat"): ("smallnorb-5x01235x9x18x6x2x96x96-testing-dat.mat.gz",
                      "cf7104eed3e51174d2f65b66d1e5878b9da233b886f161b0d88f4510ba2c7474", 130799817),
    ("test", "cat"): ("smallnorb-5x01235x9x18x6x2x96x96-testing-cat.mat.gz",
                      "ecaf6d5bb8c3bc5eab9cf0258f6d2198dd474e016e374836fc097f2e5ff509ff", 347),
    ("test", "info"): ("smallnorb-5x01235x9x18x6x2x96x96-testing-info.mat.gz",
                       "16adf314226327ee006d1a44db8cfef52773c06c829951d5653a9f6f310248a2", 10428),
}
#: NORB matrix magic numbers -> dtypes (bytes, int32, float32, float64)
_TYPES = {0x1E3D4C55: np.uint8, 0x1E3D4C54: np.dtype("<i4"), 0x1E3D4C51: np.dtype("<f4"),
          0x1E3D4C53: np.dtype("<f8")}
#: image pairs read per step
_PAIRS_PER_READ = 1024
FACTORS = ("category", "instance", "elevation", "azimuth", "lighting")


class SmallNORB(CatalogBuilder):
    """smallNORB (LeCun, Huang and Bottou, 2004): `label` is the five factors, each also its own column; both
    images of a pair stay one channel (96, 96)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/",
        assets={f"{split}_{part}": DownloadInfo(_BASE + name, checksum=f"sha256:{sha}", size=size)
                for (split, part), (name, sha, size) in _FILES.items()},
        citation="""@inproceedings{lecun2004learning,
  title={Learning methods for generic object recognition with invariance to pose and lighting},
  author={LeCun, Yann and Huang, Fu Jie and Bottou, Leon},
  booktitle={Proceedings of the 2004 IEEE Computer Society Conference on Computer Vision and Pattern Recognition},
  volume={2},
  pages={II--104},
  year={2004},
  organization={IEEE}}""",
        license="Apache-2.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="smallNORB: stereo pairs of 96x96 grayscale images of 50 toys in 5 categories, each pair a "
                        "combination of 5 factors: category, instance, elevation, azimuth, lighting.",
            features=Features({"left_image": Image(mode="L"), "right_image": Image(mode="L"),
                               "label": Sequence(Value("int32")),
                               **{factor: Value("int32") for factor in FACTORS}}),
            supervised_keys=("left_image", "label"),
            num_examples={"train": 24_300, "test": 24_300},
        )

    def _split_generators(self, dl_manager):
        paths = dl_manager.download(self._source().remote_files())
        return [SplitGenerator(split, {part: paths[f"{split}_{part}"] for part in ("dat", "cat", "info")})
                for split in ("train", "test")]

    def _generate_examples(self, dat, cat, info):
        with gzip.open(cat, "rb") as fh:
            categories = _read_matrix(fh, cat)
        with gzip.open(info, "rb") as fh:
            details = _read_matrix(fh, info)
        factors = np.column_stack([categories, details]).astype(np.int64)
        factors[:, 3] //= 2  # the files store the azimuth as 0, 2, ..., 34
        with gzip.open(dat, "rb") as fh:
            shape, dtype = _read_header(fh, dat)
            if len(shape) != 4 or shape[1:] != (2, 96, 96) or shape[0] != len(factors):
                raise StableDatasetsError(f"{dat}: images of shape {shape}, expected ({len(factors)}, 2, 96, 96)")
            pair_bytes = 2 * 96 * 96
            index = 0
            while index < shape[0]:
                count = min(_PAIRS_PER_READ, shape[0] - index)
                data = fh.read(count * pair_bytes)
                if len(data) != count * pair_bytes:
                    raise StableDatasetsError(f"{dat} ends early, after {index} of {shape[0]} image pairs")
                pairs = np.frombuffer(data, dtype=dtype).reshape(count, 2, 96, 96)
                for pair, row in zip(pairs, factors[index:index + count].tolist()):
                    yield index, {"left_image": pair[0], "right_image": pair[1], "label": row,
                                  **dict(zip(FACTORS, row))}
                    index += 1


def _read_header(fh: IO[bytes], name: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of a NORB binary matrix; the stream is left at its data."""
    head = fh.read(8)
    if len(head) != 8:
        raise StableDatasetsError(f"{name}: not a NORB matrix file (only {len(head)} bytes)")
    magic, rank = struct.unpack("<ii", head)
    if magic not in _TYPES or not 0 < rank < 16:
        raise StableDatasetsError(f"{name}: not a NORB matrix file (magic {magic:#x}, rank {rank})")
    dims = struct.unpack(f"<{max(3, rank)}i", fh.read(4 * max(3, rank)))  # at least 3 dimensions are stored
    return tuple(dims[:rank]), np.dtype(_TYPES[magic])


def _read_matrix(fh: IO[bytes], name: str) -> np.ndarray:
    """A whole (small) NORB matrix: the categories or the info table."""
    shape, dtype = _read_header(fh, name)
    data = fh.read()
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        raise StableDatasetsError(f"{name}: header says {shape} ({expected} bytes) but {len(data)} bytes follow")
    return np.frombuffer(data, dtype=dtype).reshape(shape)
