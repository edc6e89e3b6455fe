"""warblr (Bird Audio Detection challenge): 8,000 ten-second recordings from the Warblr smartphone app across the UK,
each labelled bird / no bird. One split, `train`, in the metadata's order."""

from __future__ import annotations

from stable_datasets.builder import Version
from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.timeseries._bird_detection import CHALLENGE_HOMEPAGE, BirdDetectionBuilder


class Warblr(BirdDetectionBuilder):
    """warblr; `series` is the int16 samples as float32 `[T, 1]`."""

    VERSION = Version("1.0.0")
    ROWS = 8_000
    DESCRIPTION = "warblr: ten-second smartphone recordings labelled for the presence of birds."
    SOURCE = DatasetSource(
        homepage=CHALLENGE_HOMEPAGE,
        # archive.org and figshare publish md5 digests only: no sha256 or size from a public record
        assets={"audio": DownloadInfo("https://archive.org/download/warblrb10k_public/warblrb10k_public_wav.zip",
                                      filename="warblrb10k_public_wav.zip"),
                "metadata": DownloadInfo("https://ndownloader.figshare.com/files/6035817",
                                         filename="warblrb10k_public_metadata.csv")},
        citation="""@inproceedings{stowell2016bird,
  title={Bird detection in audio: a survey and a challenge},
  author={Stowell, Dan and Wood, Mike and Stylianou, Yannis and Glotin, Herv{\\'e}},
  booktitle={IEEE International Workshop on Machine Learning for Signal Processing (MLSP)},
  year={2016}}""",
        license="CC BY 4.0",
    )
