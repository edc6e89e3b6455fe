"""Voice gender detection (VoxCeleb clips, as DagsHub's audio-datasets collects them): M4A (AAC) speech clips in
`males/` and `females/` folders of one zip. Decoded through FFmpeg's libraries (PyAV, the `audio` extra) to 16-bit
samples, as upstream's pydub decodes them; rows in sorted member order, as upstream. One split, `train`."""

from __future__ import annotations

import zipfile

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_audio_ffmpeg
from stable_datasets.features import ClassLabel, Features, Value
from stable_datasets.timeseries._shared import series_feature

_LABELS = {"males": 0, "females": 1}


class VoiceGenderDetection(CatalogBuilder):
    """Voice gender detection; `series` is the decoded 16-bit samples as float32 `[T, C]`."""

    VERSION = Version("1.0.0")
    TASK = "speaker gender classification"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://dagshub.com/DagsHub/audio-datasets/src/main/voice_gender_detection",
        # a Google Drive share: no public record of its sha256 or size
        assets={"train": DownloadInfo(
            "https://drive.google.com/u/0/uc?id=1HRbWocxwClGy9Fj1MQeugpR4vOaL9ebO&export=download",
            filename="VoxCeleb_gender.zip")},
        citation="""@inproceedings{nagrani2017voxceleb,
  title={VoxCeleb: a large-scale speaker identification dataset},
  author={Nagrani, Arsha and Chung, Joon Son and Zisserman, Andrew},
  booktitle={Interspeech},
  year={2017}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Voice gender detection: VoxCeleb speech clips labelled male or female.",
            features=Features({"series": series_feature(), "label": ClassLabel(names=["male", "female"]),
                               "gender": Value("string"), "filename": Value("string")}),
            supervised_keys=("series", "label"),
        )

    def _generate_examples(self, data_path, split):
        with zipfile.ZipFile(data_path) as archive:
            for name in sorted(archive.namelist()):
                parts = name.split("/")
                if name.endswith("/") or not name.lower().endswith(".m4a") or len(parts) < 2:
                    continue
                if parts[-2] not in _LABELS:
                    continue
                series, _ = read_audio_ffmpeg(archive.read(name), name=f"{data_path}:{name}")
                yield name, {"series": series, "label": _LABELS[parts[-2]], "gender": parts[-2][:-1],
                             "filename": parts[-1]}
