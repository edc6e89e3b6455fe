"""BirdVox-DCASE-20k (Lostanlen et al., 2018): 20,000 ten-second 44.1 kHz clips from autonomous recording units in
Ithaca, NY, labelled bird / no bird (the Bird Audio Detection challenge's CSV). One split, `train`, in the CSV's
order. The recording id is the CSV's first column and the label its third, as upstream reads them."""

from __future__ import annotations

from stable_datasets.builder import Version
from stable_datasets.catalog import DatasetSource, DownloadInfo
from stable_datasets.timeseries._bird_detection import BirdDetectionBuilder


class BirdVoxDCASE20k(BirdDetectionBuilder):
    """BirdVox-DCASE-20k; `series` is the int16 samples as float32 `[T, 1]`."""

    VERSION = Version("1.0.0")
    ROWS = 20_000
    DESCRIPTION = "BirdVox-DCASE-20k: ten-second night-time clips labelled for the presence of bird flight calls."
    SOURCE = DatasetSource(
        homepage="https://wp.nyu.edu/birdvox/birdvox-dcase-20k/",
        # Zenodo and figshare publish md5 digests only: no sha256 or size from a public record
        assets={"audio": DownloadInfo("https://zenodo.org/record/1208080/files/BirdVox-DCASE-20k.zip?download=1",
                                      fallbacks=["https://zenodo.org/records/1208080/files/BirdVox-DCASE-20k.zip"],
                                      filename="BirdVox-DCASE-20k.zip"),
                "metadata": DownloadInfo("https://ndownloader.figshare.com/files/10853300",
                                         filename="data_labels.csv")},
        citation="""@inproceedings{lostanlen2018icassp,
  title={BirdVox-full-night: a dataset and benchmark for avian flight call detection},
  author={Lostanlen, Vincent and Salamon, Justin and Farnsworth, Andrew and Kelling, Steve and Bello, Juan Pablo},
  booktitle={Proc. IEEE ICASSP},
  year={2018}}""",
        license="CC BY 4.0",
    )

    def item(self, row, fieldnames):
        label = row.get("label")
        if label is None and len(fieldnames) >= 3:
            label = row.get(fieldnames[2])
        return (str(row.get(fieldnames[0], "")) if fieldnames else ""), label

    def member_key(self, name):
        return name.rsplit("/", 1)[-1]  # any member named <id>.wav, wherever it sits

    def item_key(self, recording_id):
        return f"{recording_id}.wav"
