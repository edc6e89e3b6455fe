"""Groove MIDI (Gillick et al., 2019): drum performances by 10 drummers on an electronic kit, each a MIDI file and,
for most, a 44.1 kHz WAV rendering, from the official groove-v1.0.0.zip. The rows are info.csv's performances that
have audio, split by its `split` column (train / validation / test), in its order; `midi` holds the MIDI file's
bytes (no MIDI library is needed: they are stored as they are, as upstream stores them). `series` is on
soundfile's [-1, 1] scale, as upstream decodes this dataset; an audio file libsndfile cannot decode is skipped, as
upstream skips it."""

from __future__ import annotations

import csv
import io
import zipfile

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Features, Value
from stable_datasets.timeseries._shared import series_feature

_SPLITS = ("train", "validation", "test")
_TEXT_COLUMNS = ("drummer", "session", "style", "bpm", "beat_type", "time_signature", "duration", "split",
                 "audio_filename", "midi_filename")


class GrooveMIDI(CatalogBuilder):
    """Groove MIDI Dataset (audio + MIDI); `series` is float32 `[T, C]` in [-1, 1]."""

    VERSION = Version("1.0.0")
    TASK = "drum performance modelling (audio and MIDI)"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://magenta.tensorflow.org/datasets/groove",
        # sha256 and size from TFDS's url_checksums/groove.txt
        assets={"archive": DownloadInfo(
            "https://storage.googleapis.com/magentadata/datasets/groove/groove-v1.0.0.zip",
            checksum="sha256:21559feb2f1c96ca53988fd4d7060b1f2afe1d854fb2a8dcea5ff95cf3cce7e9", size=5111599714,
            filename="groove-v1.0.0.zip")},
        citation="""@inproceedings{groove2019,
  author={Jon Gillick and Adam Roberts and Jesse Engel and Douglas Eck and David Bamman},
  title={Learning to Groove with Inverse Sequence Transformations},
  booktitle={International Conference on Machine Learning (ICML)},
  year={2019}}""",
        license="CC BY 4.0",
    )

    def _info(self) -> DatasetInfo:
        columns = {"series": series_feature(), "midi": Value("binary"), "drummer": Value("string"),
                   "session": Value("string"), "example_id": Value("string")}
        columns.update({name: Value("string") for name in _TEXT_COLUMNS if name not in columns})
        order = ["series", "midi", "drummer", "session", "example_id", "style", "bpm", "beat_type", "time_signature",
                 "duration", "split", "audio_filename", "midi_filename"]
        return DatasetInfo(
            description="Groove MIDI Dataset: 13.6 hours of human drumming as aligned MIDI and audio, with drummer, "
                        "session, style, tempo, beat type, time signature and duration.",
            features=Features({name: columns[name] for name in order}),
        )

    def _split_generators(self, dl_manager):
        path = dl_manager.download(self._source().remote_files())["archive"]
        return [SplitGenerator(split, {"data_path": path, "split": split}) for split in _SPLITS]

    def _generate_examples(self, data_path, split):
        with zipfile.ZipFile(data_path) as archive:
            members = set(archive.namelist())
            if "groove/info.csv" not in members:
                raise StableDatasetsError(f"{data_path} lacks the member groove/info.csv")
            with archive.open("groove/info.csv") as fh:
                rows = list(csv.DictReader(io.TextIOWrapper(fh, encoding="utf-8")))
            for row in rows:
                audio, midi = f"groove/{row['audio_filename']}", f"groove/{row['midi_filename']}"
                if row["split"] != split or audio not in members or midi not in members:
                    continue
                try:
                    series = read_series(archive.read(audio), scale="unit", name=f"{data_path}:{audio}")
                except StableDatasetsError:
                    continue
                yield row["id"], {"series": series, "midi": archive.read(midi), "example_id": row["id"],
                                  **{name: row[name] for name in _TEXT_COLUMNS}}
