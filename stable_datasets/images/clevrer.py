"""CLEVRER (Yi et al., 2020): 20,000 synthetic videos of colliding objects with descriptive, explanatory,
predictive and counterfactual questions; 10,000 train / 5,000 validation / 5,000 test. Videos are read from the
official zips member by member (never extracted) and kept in the cache as files (`Video(storage="path")`);
annotations are read one member at a time as rows need them. A question file is JSON and is read whole."""

from __future__ import annotations

import contextlib
import json
import posixpath
import zipfile

from stable_datasets.builder import DatasetInfo, Split, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Features, Value, Video

_BASE = "http://data.csail.mit.edu/clevrer/"
#: no public sha256 or size record exists for these files: the downloads are not checked
_FILES = {
    "train_videos": DownloadInfo(_BASE + "videos/train/video_train.zip"),
    "train_annotations": DownloadInfo(_BASE + "annotations/train/annotation_train.zip"),
    "train_questions": DownloadInfo(_BASE + "questions/train.json"),
    "validation_videos": DownloadInfo(_BASE + "videos/validation/video_validation.zip"),
    "validation_annotations": DownloadInfo(_BASE + "annotations/validation/annotation_validation.zip"),
    "validation_questions": DownloadInfo(_BASE + "questions/validation.json"),
    "test_videos": DownloadInfo(_BASE + "videos/test/video_test.zip"),
    "test_questions": DownloadInfo(_BASE + "questions/test.json"),
}


class CLEVRER(CatalogBuilder):
    """CLEVRER: a row per scene of the question file; questions and annotations as JSON strings (the test split
    has no annotations: "{}")."""

    VERSION = Version("1.0.0")
    TASK = "video reasoning"
    SOURCE = DatasetSource(
        homepage="http://clevrer.csail.mit.edu/",
        assets=_FILES,
        citation="""@inproceedings{yi2020clevrer,
  title={CLEVRER: CoLlision Events for Video REpresentation and Reasoning},
  author={Yi, Kexin and Gan, Chuang and Li, Yunzhu and Kohli, Pushmeet and Wu, Jiajun and Torralba, Antonio and
          Tenenbaum, Joshua B},
  booktitle={International Conference on Learning Representations},
  year={2020}}""",
        license="CC0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="CLEVRER: a diagnostic video dataset for temporal and causal reasoning; 20,000 synthetic "
                        "5-second videos (128 frames, 480x320) with four types of questions.",
            features=Features({"video": Video(storage="path"), "scene_index": Value("int32"),
                               "video_filename": Value("string"), "questions_json": Value("string"),
                               "annotations_json": Value("string")}),
            supervised_keys=None,
            num_examples={"train": 10_000, "validation": 5_000, "test": 5_000},
        )

    def _split_generators(self, dl_manager):
        paths = dl_manager.download(self._source().remote_files())
        return [SplitGenerator(name, {"videos_path": paths[f"{name}_videos"],
                                      "annotations_path": paths.get(f"{name}_annotations"),
                                      "questions_path": paths[f"{name}_questions"], "split": name})
                for name in (Split.TRAIN, Split.VALIDATION, Split.TEST)]

    def _generate_examples(self, videos_path, annotations_path, questions_path, split):
        """Scenes in the question file's order; a scene whose video is not in the zip is skipped (as upstream)."""
        with open(questions_path, encoding="utf-8") as fh:
            scenes = {item["scene_index"]: item for item in json.load(fh)}
        with zipfile.ZipFile(videos_path) as videos, _optional_zip(annotations_path) as annotations:
            video_members = _by_basename(videos)
            annotation_members = _annotations_by_scene(annotations) if annotations else {}
            for scene_index, item in scenes.items():
                member = video_members.get(item["video_filename"])
                if member is None:
                    continue
                annotation = {}
                if scene_index in annotation_members:
                    annotation = json.loads(annotations.read(annotation_members[scene_index]))
                    if annotation.get("scene_index") != scene_index:
                        raise StableDatasetsError(f"{annotations_path}:{annotation_members[scene_index]} holds "
                                                  f"scene {annotation.get('scene_index')}, not {scene_index}")
                yield scene_index, {"video": videos.read(member), "scene_index": scene_index,
                                    "video_filename": item["video_filename"],
                                    "questions_json": json.dumps(item.get("questions", [])),
                                    "annotations_json": json.dumps(annotation)}


def _optional_zip(path: str | None) -> contextlib.AbstractContextManager:
    return zipfile.ZipFile(path) if path is not None else contextlib.nullcontext(None)


def _by_basename(archive: zipfile.ZipFile) -> dict[str, str]:
    """File name -> member (videos sit in folders of 1,000)."""
    return {posixpath.basename(info.filename): info.filename for info in archive.infolist() if not info.is_dir()}


def _annotations_by_scene(archive: zipfile.ZipFile) -> dict[int, str]:
    """Scene index -> member, from the names `annotation_<scene>.json` (each member's own scene_index is checked
    when it is read)."""
    members = {}
    for name, member in _by_basename(archive).items():
        stem, ext = posixpath.splitext(name)
        number = stem.rsplit("_", 1)[-1]
        if ext == ".json" and number.isdigit():
            members[int(number)] = member
    return members
