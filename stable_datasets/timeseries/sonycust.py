"""SONYC Urban Sound Tagging, development set (Cartwright et al., 2019): ten-second 44.1 kHz recordings from acoustic
sensors in New York City, each annotated by several people with 29 fine and 8 coarse urban sound classes.

A row is one line of annotations-dev.csv (one annotator's view of one clip), with its clip's samples, as upstream
yields them. The rows are read in the audio tarball's order, each clip decoded once and followed by its annotation
lines in the CSV's order: upstream walks the CSV and seeks in the gzip stream for each line (backward seeks restart
the decompression); the set of rows is the same. One split, `train` (the CSV's own split column is in `metadata`)."""

from __future__ import annotations

import csv

import numpy as np

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Features, Sequence, Value
from stable_datasets.timeseries._shared import series_feature, tar_files

COARSE_LABELS = ["engine", "machinery-impact", "non-machinery-impact", "powered-saw", "alert-signal", "music",
                 "human-voice", "dog"]
#: the fine columns of each coarse class: fine[FINE_BLOCKS[i]:FINE_BLOCKS[i + 1]]
FINE_BLOCKS = [0, 4, 9, 10, 14, 19, 23, 28, 29]
_FINE = slice(4, 33)  # the 29 fine presence columns, after split, sensor_id, audio_filename, annotator_id


def _zenodo(name: str) -> DownloadInfo:
    # Zenodo publishes md5 digests only: no sha256 or size from a public record
    return DownloadInfo(f"https://zenodo.org/record/3233082/files/{name}?download=1",
                        fallbacks=[f"https://zenodo.org/records/3233082/files/{name}"], filename=name)


class SONYCUST(CatalogBuilder):
    """SONYC-UST (development); `series` is the int16 samples as float32 `[T, 1]`."""

    VERSION = Version("1.0.0")
    TASK = "urban sound tagging (multi-label audio classification)"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://zenodo.org/records/3233082",
        assets={"audio": _zenodo("audio-dev.tar.gz"), "annotations": _zenodo("annotations-dev.csv")},
        citation="""@inproceedings{cartwright2019sonyc,
  title={SONYC Urban Sound Tagging (SONYC-UST): A Multilabel Dataset from an Urban Acoustic Sensor Network},
  author={Cartwright, Mark and Mendez, Ana Elisa Mendez and Cramer, Jason and Lostanlen, Vincent and Dove, Graham
          and Wu, Ho-Hsiang and Salamon, Justin and Nov, Oded and Bello, Juan Pablo},
  booktitle={Proceedings of the Workshop on Detection and Classification of Acoustic Scenes and Events (DCASE)},
  year={2019}}""",
        license="CC BY 4.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="SONYC-UST development set: one row per annotation of a ten-second clip, with the 29 fine "
                        "and 8 coarse presence labels (a coarse label is the maximum of its fine ones).",
            features=Features({"series": series_feature(), "fine_labels": Sequence(Value("int32")),
                               "coarse_labels": Sequence(Value("int32")),
                               "fine_label_names": Sequence(Value("string")),
                               "coarse_label_names": Sequence(Value("string")), "relative_path": Value("string"),
                               "filename": Value("string"), "metadata": Sequence(Value("string"))}),
        )

    def _split_generators(self, dl_manager):
        files = dl_manager.download(self._source().remote_files())
        return [SplitGenerator("train", {"audio_path": files["audio"], "annotations_path": files["annotations"]})]

    def _generate_examples(self, audio_path, annotations_path):
        with open(annotations_path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            rows = [(index, row) for index, row in enumerate(reader) if len(row) >= 33]
        fine_names = header[_FINE]
        by_clip: dict[str, list[tuple[int, list[str]]]] = {}
        for index, row in rows:
            by_clip.setdefault(f"{row[0]}/{row[2]}", []).append((index, row))
        for name, data in tar_files(audio_path, ".wav"):
            clip = "/".join(name.split("/")[-2:])
            lines = by_clip.pop(clip, None)
            if lines is None:
                continue
            series = read_series(data, name=f"{audio_path}:{name}")
            for index, row in lines:
                fine = np.asarray(row[_FINE], dtype=np.float32).astype(np.int32)
                coarse = np.maximum.reduceat(fine, FINE_BLOCKS[:-1]).tolist()
                yield index, {"series": series, "fine_labels": fine.tolist(), "coarse_labels": coarse,
                              "fine_label_names": fine_names, "coarse_label_names": COARSE_LABELS,
                              "relative_path": clip, "filename": row[2], "metadata": row[:4]}
        if by_clip:
            raise StableDatasetsError(f"{audio_path} lacks the clips {sorted(by_clip)[:5]} named in "
                                      f"{annotations_path} ({len(by_clip)} missing)")
