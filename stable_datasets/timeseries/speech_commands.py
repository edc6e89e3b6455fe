"""Speech Commands v0.01 (Warden, 2017): 64,727 one-second 16 kHz WAV utterances of 30 words by 1,881 speakers,
read member by member from the official tarball (the background-noise clips are left out, as upstream does).
One split, `train`, in the archive's order, as upstream."""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.features import ClassLabel, Features, Value
from stable_datasets.timeseries._shared import series_feature, tar_files

LABELS = [
    "bed", "bird", "cat", "dog", "down", "eight", "five", "four", "go", "happy", "house", "left", "marvin", "nine",
    "no", "off", "on", "one", "right", "seven", "sheila", "six", "stop", "three", "tree", "two", "up", "wow", "yes",
    "zero",
]
_INDEX = {name: i for i, name in enumerate(LABELS)}


class SpeechCommands(CatalogBuilder):
    """Speech Commands keyword spotting; `series` is the int16 samples as float32 `[16000, 1]` (most clips)."""

    VERSION = Version("1.0.0")
    TASK = "keyword spotting (audio classification)"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://ai.googleblog.com/2017/08/launching-speech-commands-dataset.html",
        # sha256 from torchaudio's SPEECHCOMMANDS record; no public record of the size was found
        assets={"train": DownloadInfo(
            "http://download.tensorflow.org/data/speech_commands_v0.01.tar.gz",
            fallbacks=["https://storage.googleapis.com/download.tensorflow.org/data/speech_commands_v0.01.tar.gz"],
            checksum="sha256:743935421bb51cccdb6bdd152e04c5c70274e935c82119ad7faeec31780d811d",
            filename="speech_commands_v0.01.tar.gz")},
        citation="""@article{speechcommandsv2,
  author = {Warden, Pete},
  title = {Speech Commands: A Dataset for Limited-Vocabulary Speech Recognition},
  journal = {ArXiv e-prints},
  archivePrefix = {arXiv},
  eprint = {1804.03209},
  year = {2018}}""",
        license="CC BY 4.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Speech Commands v0.01: one-second utterances of 30 short words, with the speaker and the "
                        "utterance number parsed from each file name (<speaker>_nohash_<n>.wav).",
            features=Features({"series": series_feature(), "label": ClassLabel(names=LABELS),
                               "label_name": Value("string"), "speaker_id": Value("string"),
                               "utterance_id": Value("int32"), "filename": Value("string")}),
            supervised_keys=("series", "label"),
            num_examples={"train": 64_727},
        )

    def _generate_examples(self, data_path, split):
        for name, data in tar_files(data_path, ".wav"):
            parts = name.split("/")
            if len(parts) < 2 or parts[-2] not in _INDEX:  # _background_noise_ and anything else
                continue
            word, filename = parts[-2], parts[-1]
            speaker, utterance = "", 0
            if "_nohash_" in filename:
                speaker, rest = filename[:-4].split("_nohash_", 1)
                utterance = int(rest) if rest.isdigit() else 0
            yield name, {"series": read_series(data, name=f"{data_path}:{name}"), "label": _INDEX[word],
                         "label_name": word, "speaker_id": speaker, "utterance_id": utterance, "filename": filename}
