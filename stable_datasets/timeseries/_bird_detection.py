"""The Bird Audio Detection challenge's datasets (freefield1010, warblr, BirdVox-DCASE-20k): a zip of 10-second WAV
clips and a CSV of (item id, has a bird). Rows follow the CSV's order, each clip read from the zip in place; the
member of an item is found through an index of the zip built once."""

from __future__ import annotations

import csv
import zipfile
from typing import ClassVar

from stable_datasets.builder import DatasetInfo, SplitGenerator
from stable_datasets.catalog import CatalogBuilder
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Value
from stable_datasets.timeseries._shared import series_feature

CHALLENGE_HOMEPAGE = "http://machine-listening.eecs.qmul.ac.uk/bird-audio-detection-challenge/#downloads"


class BirdDetectionBuilder(CatalogBuilder):
    """A subclass sets `ROWS` (the clips) and `DESCRIPTION`; its SOURCE has the assets "audio" and "metadata"."""

    ROWS: ClassVar[int]
    DESCRIPTION: ClassVar[str]
    TASK = "bird presence detection (audio classification)"
    EXTRA = "audio"

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description=self.DESCRIPTION,
            features=Features({"series": series_feature(), "label": ClassLabel(names=["no_bird", "bird"]),
                               "recording_id": Value("string"), "filename": Value("string")}),
            supervised_keys=("series", "label"),
            num_examples={"train": self.ROWS},
        )

    def _split_generators(self, dl_manager):
        files = dl_manager.download(self._source().remote_files())
        return [SplitGenerator("train", {"audio_path": files["audio"], "metadata_path": files["metadata"]})]

    def item(self, row: dict[str, str], fieldnames: list[str]) -> tuple[str, str]:
        """(recording id, label) of a CSV row: the `itemid` and `hasbird` columns."""
        return str(row.get("itemid", row.get("id", ""))), row.get("hasbird", row.get("label", "0"))

    def member_key(self, name: str) -> str | None:
        """The key a zip member is found by (`item_key` of its recording id), or None for members to ignore: here
        `<id>.wav` in a folder named wav, any case."""
        parts = name.lower().rsplit("/", 2)
        return parts[-1] if len(parts) >= 2 and parts[-2] == "wav" else None

    def item_key(self, recording_id: str) -> str:
        return f"{recording_id}.wav".lower()

    def _generate_examples(self, audio_path, metadata_path):
        with open(metadata_path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            fieldnames = list(reader.fieldnames or [])
        with zipfile.ZipFile(audio_path) as archive:
            members: dict[str, str] = {}
            for name in archive.namelist():
                key = self.member_key(name)
                if key is not None:
                    members.setdefault(key, name)
            for line, row in enumerate(rows, start=2):
                recording_id, label = self.item(row, fieldnames)
                member = members.get(self.item_key(recording_id))
                if member is None:
                    raise StableDatasetsError(f"{audio_path} has no clip for the item {recording_id!r} of "
                                              f"{metadata_path} line {line}")
                yield recording_id, {"series": read_series(archive.read(member), name=f"{audio_path}:{member}"),
                                     "label": int(label), "recording_id": recording_id,
                                     "filename": f"{recording_id}.wav"}
