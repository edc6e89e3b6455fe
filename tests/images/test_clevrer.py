"""CLEVRER from miniature official files (video zips of MP4s written by OpenCV from real digits, annotation zips,
question JSON) under the official URLs."""

from __future__ import annotations

import json

import numpy as np

import stable_datasets as sds
from stable_datasets.features.video import VideoRef, count_frames
from stable_datasets.images import CLEVRER
from tests.fixtures.catalog import digit_frames, mp4_bytes, serve_urls, zip_bytes

BASE = "http://data.csail.mit.edu/clevrer/"


def question(scene: int, filename: str) -> dict:
    return {"scene_index": scene, "video_filename": filename,
            "questions": [{"question_id": 0, "question": f"What color is object {scene}?",
                           "question_type": "descriptive", "answer": "red"}]}


def annotation(scene: int) -> bytes:
    return json.dumps({"scene_index": scene, "video_filename": f"video_{scene:05d}.mp4",
                       "object_property": [{"object_id": 0, "color": "red"}], "motion_trajectory": []}).encode()


def test_clevrer_rows_from_questions_videos_and_annotations(monkeypatch):
    videos = {scene: mp4_bytes(digit_frames(4, offset=scene * 4)) for scene in (0, 1, 10000, 15000)}
    files = {
        BASE + "videos/train/video_train.zip": zip_bytes({
            "video_00000-01000/video_00001.mp4": videos[1], "video_00000-01000/video_00000.mp4": videos[0]}),
        BASE + "annotations/train/annotation_train.zip": zip_bytes({
            "annotation_00000-01000/annotation_00000.json": annotation(0),
            "annotation_00000-01000/annotation_00001.json": annotation(1)}),
        BASE + "questions/train.json": json.dumps([question(1, "video_00001.mp4"), question(0, "video_00000.mp4"),
                                                   question(2, "video_00002.mp4")]).encode(),  # no video: skipped
        BASE + "videos/validation/video_validation.zip": zip_bytes({
            "video_10000-11000/video_10000.mp4": videos[10000]}),
        BASE + "annotations/validation/annotation_validation.zip": zip_bytes({
            "annotation_10000-11000/annotation_10000.json": annotation(10000)}),
        BASE + "questions/validation.json": json.dumps([question(10000, "video_10000.mp4")]).encode(),
        BASE + "videos/test/video_test.zip": zip_bytes({"video_15000-16000/video_15000.mp4": videos[15000]}),
        BASE + "questions/test.json": json.dumps([question(15000, "video_15000.mp4")]).encode(),
    }
    with serve_urls(monkeypatch, files):
        data = CLEVRER(verification_mode="no_checks")
        test = sds.load_dataset("clevrer", split="test", verification_mode="no_checks")
    train = data["train"]
    assert sorted(data) == ["test", "train", "validation"]
    assert set(train[0]) == {"video", "scene_index", "video_filename", "questions_json", "annotations_json"}
    assert train["scene_index"] == [1, 0] and train["video_filename"] == ["video_00001.mp4", "video_00000.mp4"]
    ref = train[0]["video"]
    assert isinstance(ref, VideoRef) and ref.path is not None and ref.extension == "mp4"
    assert ref.read_bytes() == videos[1] and count_frames(ref.path) == 4
    questions = json.loads(train[0]["questions_json"])
    assert questions[0]["question"] == "What color is object 1?" and questions[0]["question_type"] == "descriptive"
    assert json.loads(train[1]["annotations_json"]) == json.loads(annotation(0))
    assert train[1]["annotations_json"] == json.dumps(json.loads(annotation(0)))  # upstream's json.dumps form
    assert data["validation"]["scene_index"] == [10000]
    assert test["annotations_json"] == ["{}"] and test[0]["video"].read_bytes() == videos[15000]
    frames = CLEVRER(split="train", verification_mode="no_checks", decode_video={"num_frames": 4})[1]["video"]
    assert frames.shape == (4, 32, 32, 3) and frames.dtype == np.uint8
    assert train.info.num_examples == {"train": 10_000, "validation": 5_000, "test": 5_000}
