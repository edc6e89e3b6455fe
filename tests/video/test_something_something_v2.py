"""Something-Something V2 from manual-download folders laid out as MANUAL_DOWNLOAD says: extracted videos/ and
labels/, or the archive parts and the labels zip as downloaded (videos are MP4s written by OpenCV from digits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stable_datasets as sds
from stable_datasets.catalog import catalog_classes
from stable_datasets.errors import ManualDownloadError
from stable_datasets.features.video import VideoRef, count_frames
from stable_datasets.video import SomethingSomethingV2, SSv2, something_something_v2
from tests.fixtures.catalog import digit_frames, mp4_bytes, tar_bytes, zip_bytes

LABELS = {
    "labels.json": json.dumps({"Holding something": "16", "Putting something on a surface": "109"}),
    "train.json": json.dumps([
        {"id": "1", "label": "holding cup", "template": "Holding [something]", "placeholders": ["cup"]},
        {"id": "4", "label": "holding pen", "template": "Holding [something]", "placeholders": ["pen"]},  # no video
        {"id": "7", "label": "putting a box on a table", "template": "Putting [something] on a surface",
         "placeholders": ["a box"]}]),
    "validation.json": json.dumps([{"id": "2", "label": "putting cup on a table",
                                    "template": "Putting [something] on a surface", "placeholders": ["cup"]}]),
    "test.json": json.dumps([{"id": "3"}, {"id": "5"}]),
    "test-answers.csv": "3;Holding something\n5;Dropping something\n",
}
VIDEOS = {video_id: mp4_bytes(digit_frames(3, offset=int(video_id))) for video_id in ("1", "2", "3", "5", "7")}


def check_rows(data) -> None:
    train = data["train"]
    assert train["video_id"] == ["1", "7"]  # the annotations' order; id 4 has no video and is skipped
    row = train[0]
    assert set(row) == {"video", "video_id", "video_filename", "label", "text", "template", "placeholders_json",
                        "split"}
    assert isinstance(row["video"], VideoRef) and row["video"].read_bytes() == VIDEOS["1"]
    assert count_frames(row["video"].path) == 3
    assert row["video_filename"] == "1.mp4" and row["label"] == 16 and row["text"] == "holding cup"
    assert row["template"] == "Holding something" and json.loads(row["placeholders_json"]) == ["cup"]
    assert row["split"] == "train" and train[1]["label"] == 109
    assert data["validation"][0]["video"].read_bytes() == VIDEOS["2"]
    assert data["validation"]["split"] == ["validation"]
    test = data["test"]
    assert test["label"] == [16, -1]  # a template labels.json lacks is -1, as upstream's
    assert test["text"] == ["Holding something", "Dropping something"] and test["split"] == ["test", "test"]


def test_ssv2_from_extracted_videos_and_labels_folders(tmp_path):
    tmp_path = tmp_path / "raw"  # the download's folder, apart from the cache
    (tmp_path / "labels").mkdir(parents=True)
    (tmp_path / "videos" / "part").mkdir(parents=True)
    for name, text in LABELS.items():
        (tmp_path / "labels" / name).write_text(text)
    for video_id, data in VIDEOS.items():
        (tmp_path / "videos" / "part" / f"{video_id}.mp4").write_bytes(data)
    data = SomethingSomethingV2(manual_dir=str(tmp_path), verification_mode="no_checks")
    check_rows(data)
    alias = SSv2(split="test", data_dir=str(tmp_path), verification_mode="no_checks")
    assert SSv2 is SomethingSomethingV2 and alias["video_id"] == ["3", "5"]
    loaded = sds.load_dataset("something_something_v2", split="validation", data_dir=str(tmp_path),
                              verification_mode="no_checks")
    assert loaded["video_id"] == ["2"] and loaded.info.num_examples == {"train": 168_913, "validation": 24_777,
                                                                       "test": 27_157}


@pytest.mark.parametrize("container", ["zip", "tar"])
def test_ssv2_from_the_downloaded_archive_parts_read_in_place(tmp_path, container):
    tmp_path = tmp_path / "raw"
    tmp_path.mkdir()
    members = {f"20bn-something-something-v2/{video_id}.mp4": data for video_id, data in VIDEOS.items()}
    archive = zip_bytes(members) if container == "zip" else tar_bytes(members, mode="w")
    cut = len(archive) // 2
    (tmp_path / "20bn-something-something-v2-00").write_bytes(archive[:cut])
    (tmp_path / "20bn-something-something-v2-01").write_bytes(archive[cut:])
    (tmp_path / "20bn-something-something-download-package-labels.zip").write_bytes(
        zip_bytes({f"labels/{name}": text.encode() for name, text in LABELS.items()}))
    data = SomethingSomethingV2(manual_dir=str(tmp_path), verification_mode="no_checks")
    check_rows(data)
    assert not (tmp_path / "videos").exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "20bn-something-something-download-package-labels.zip", "20bn-something-something-v2-00",
        "20bn-something-something-v2-01"]  # nothing extracted beside the download


def test_ssv2_says_what_to_download(tmp_path: Path):
    with pytest.raises(ManualDownloadError, match=r"something_something_v2: no data_dir was given\. Download "
                                                  r"Something-Something v2 from"):
        SomethingSomethingV2(split="train")
    with pytest.raises(ManualDownloadError, match=r"has no labels/ folder and no \*labels\*\.zip"):
        SomethingSomethingV2(split="train", manual_dir=str(tmp_path))


def test_ssv2_without_videos_says_so(tmp_path: Path):
    (tmp_path / "raw" / "labels").mkdir(parents=True)
    for name, text in LABELS.items():
        (tmp_path / "raw" / "labels" / name).write_text(text)
    with pytest.raises(ManualDownloadError, match=r"raw holds no videos \(no videos/ folder, no "
                                                  r"20bn-something-something-v2-\?\? parts, no video files\)"):
        SomethingSomethingV2(split="train", manual_dir=str(tmp_path / "raw"))


def test_ssv2_alias_is_one_catalog_class():
    assert catalog_classes(something_something_v2) == [SomethingSomethingV2]
