"""freefield1010 (Stowell and Plumbley, 2014), as the Bird Audio Detection challenge ships it: 7,690 ten-second
44.1 kHz field recordings from Freesound, each labelled bird / no bird. One split, `train`, in the metadata's order."""

from __future__ import annotations

from stable_datasets.builder import Version
from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.timeseries._bird_detection import CHALLENGE_HOMEPAGE, BirdDetectionBuilder


class Freefield1010(BirdDetectionBuilder):
    """freefield1010; `series` is the int16 samples as float32 `[T, 1]`."""

    VERSION = Version("1.0.0")
    ROWS = 7_690
    DESCRIPTION = "freefield1010: ten-second field recordings from Freesound labelled for the presence of birds."
    SOURCE = DatasetSource(
        homepage=CHALLENGE_HOMEPAGE,
        # archive.org and figshare publish md5 digests only: no sha256 or size from a public record
        assets={"audio": DownloadInfo("https://archive.org/download/ff1010bird/ff1010bird_wav.zip",
                                      filename="ff1010bird_wav.zip"),
                "metadata": DownloadInfo("https://ndownloader.figshare.com/files/6035814",
                                         filename="ff1010bird_metadata.csv")},
        citation="""@inproceedings{stowell2014freefield1010,
  title={An open dataset for research on audio field recording archives: freefield1010},
  author={Stowell, Dan and Plumbley, Mark D.},
  booktitle={Proceedings of the Audio Engineering Society 53rd Conference on Semantic Audio},
  year={2014}}""",
        license="CC BY (each clip as its Freesound licence)",
    )
