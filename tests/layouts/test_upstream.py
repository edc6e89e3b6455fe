"""Caches written by the upstream stable-datasets open read-only (issue 13 item 11).

The fixtures write `_metadata.json` and shards the way upstream's `cache.py` does
(galilai-group/stable-datasets: `write_sharded_arrow_cache`, layout "arrow-shards",
`shard-NNNNN.arrow`, `stable_datasets.feature` field metadata, zero shards for an empty split).
"""

from __future__ import annotations

import json
import pickle

import cv2
import numpy as np
import pyarrow as pa
import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError
from tests.upstream_caches import (
    digit_images,
    upstream_field,
    write_tiny_video,
    write_upstream_cache,
    write_upstream_frames_cache,
    write_upstream_lance_cache,
)


@pytest.mark.parametrize("layout", ["arrow-shards", "lance-rows"])
def test_upstream_caches_open_read_only(tmp_path, layout):
    cache = tmp_path / "mnist_default_train_abc"
    cache = write_upstream_cache(cache, [3, 4]) if layout == "arrow-shards" else write_upstream_lance_cache(cache, 7)
    before = {str(p): p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    ds = sds.open_cache(cache)
    assert len(ds) == 7 and list(ds.features) == ["image", "label", "caption", "tokens", "volume"]
    row = ds[5]
    assert np.array_equal(row["image"], cv2.cvtColor(digit_images(7)[5], cv2.COLOR_GRAY2RGB))
    assert row["label"] == 5 and row["caption"] == "digit 5" and row["tokens"] == [5, 1]
    assert row["volume"] == bytes([5] * 8)
    assert [r["caption"] for r in ds.select([6, 0])] == ["digit 6", "digit 0"]
    again = pickle.loads(pickle.dumps(ds))
    assert again[3]["caption"] == "digit 3"
    assert {str(p): p.read_bytes() for p in cache.rglob("*") if p.is_file()} == before  # nothing written


def test_upstream_empty_split_has_zero_shards(tmp_path):
    ds = sds.open_cache(write_upstream_cache(tmp_path / "empty", []))
    assert len(ds) == 0 and list(ds) == []


def test_upstream_caches_we_cannot_serve_say_what_to_do(tmp_path):
    not_lance = write_upstream_cache(tmp_path / "not-lance", [1], layout="lance-rows")
    with pytest.raises(CacheError, match="not-lance: not a readable Lance dataset"):
        sds.open_cache(not_lance)
    video = pa.schema([upstream_field("video", pa.struct([("path", pa.string())]), "Video")])
    cache = tmp_path / "video"
    cache.mkdir()
    with pa.OSFile(str(cache / "shard-00000.arrow"), "wb") as sink, pa.ipc.new_file(sink, video) as writer:
        writer.write_batch(pa.record_batch([pa.array([{"path": "a.mp4"}])], schema=video))
    (cache / "_metadata.json").write_text(json.dumps({"format": "arrow", "layout": "arrow-shards", "num_rows": 1,
                                                      "num_shards": 1, "shard_row_counts": [1],
                                                      "shard_filenames": ["shard-00000.arrow"]}))
    with pytest.raises(CacheError, match="column 'video' is an upstream Video column"):
        sds.open_cache(cache)


@pytest.mark.parametrize(("change", "message"), [
    ({"num_rows": 8}, "summing to 7, but records 2 shards and 8 rows"),
    ({"shard_filenames": ["shard-00000.arrow", "../../etc/passwd"]}, "is not a file name in the cache directory"),
    ({"shard_filenames": ["shard-00000.arrow", "shard-00009.arrow"]}, "shard-00009.arrow: shard listed in"),
    ({"shard_row_counts": "lots"}, "unreadable upstream arrow-shards metadata"),
])
def test_damaged_upstream_metadata_is_an_error(tmp_path, change, message):
    cache = write_upstream_cache(tmp_path / "c", [3, 4])
    meta = json.loads((cache / "_metadata.json").read_text())
    (cache / "_metadata.json").write_text(json.dumps({**meta, **change}))
    with pytest.raises(CacheError, match=message):
        sds.open_cache(cache)






def test_upstream_video_frames_cache_serves_frame_windows(tmp_path):
    # upstream's test_lance_video_frames_cache_segment_roundtrip: 5 frames of 12x12, window 3, hop 2
    tiny = write_tiny_video(tmp_path / "tiny.mp4")
    longer = write_tiny_video(tmp_path / "longer.mp4", frames=7)
    cache = write_upstream_frames_cache(tmp_path / "frames", [(tiny, {"label": 3}), (longer, {"label": 4})])
    before = {str(p): p.read_bytes() for p in cache.rglob("*") if p.is_file()}
    ds = sds.open_cache(cache, window_length=3, hop=2)
    assert len(ds) == 2 + 3 and ds.features["label"].dtype == "int64"
    row = ds[0]
    assert row["video"].shape == (3, 12, 12, 3) and row["frame_indices"] == [0, 1, 2] and row["label"] == 3
    assert list(ds)[1]["frame_indices"] == [2, 3, 4]
    last = ds[-1]
    assert last["video_index"] == 1 and last["frame_indices"] == [4, 5, 6] and last["label"] == 4
    # the frames are upstream's WebP bytes, decoded: frame i is grey i * 20 (lossy, so within a few levels)
    assert np.abs(last["video"].astype(int) - np.array([80, 100, 120])[:, None, None, None]).max() <= 6
    raw = ds.with_format("python", decode=False)[2]["video"]
    blobs = __import__("lance").dataset(str(cache)).take([5, 6, 7], columns=["bytes"]).column("bytes").to_pylist()
    assert raw == blobs
    assert pickle.loads(pickle.dumps(ds))[4]["frame_indices"] == [4, 5, 6]
    assert {str(p): p.read_bytes() for p in cache.rglob("*") if p.is_file()} == before  # nothing written


@pytest.mark.parametrize(("change", "message"), [
    ({"videos": []}, "must list its videos"),
    ({"video_column": None}, "names no video_column"),
    ({"videos": [{"T": 5, "H": 12, "W": 12, "start_row": 1}]}, r"videos\[0\]: start_row is 1, expected 0"),
    ({"videos": [{"T": -1, "H": 12, "W": 12, "start_row": 0}]}, r"videos\[0\]: T must be a non-negative integer"),
])
def test_damaged_upstream_frames_metadata_is_an_error(tmp_path, change, message):
    cache = write_upstream_frames_cache(tmp_path / "frames", [(write_tiny_video(tmp_path / "t.mp4"), {})])
    meta = json.loads((cache / "_metadata.json").read_text())
    (cache / "_metadata.json").write_text(json.dumps({**meta, **change}))
    with pytest.raises(CacheError, match=message):
        sds.open_cache(cache)


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_compressed_upstream_shards_open_and_migrate(tmp_path, compression):
    cache = write_upstream_cache(tmp_path / "c", [2, 3, 1], compression=compression)
    ds = sds.open_cache(cache)
    assert len(ds) == 6 and [r["caption"] for r in ds] == [f"digit {i}" for i in range(6)]
    assert ds.cache_metadata[0].extra["upstream"]["compression"] == compression
    from stable_datasets.migrate import migrate_cache

    migrated = migrate_cache(cache, tmp_path / "ours")
    assert migrated.num_rows == 6 and sds.open_cache(tmp_path / "ours")[5]["caption"] == "digit 5"


def _frames_cache(directory, videos, rows=None):
    """An upstream lance-video-frames cache from `videos` [(video_id, T)]: frame f of video v is grey 50 * v + 10 * f;
    `rows` [(video_id, frame_idx)] is the Lance rows' order when it is not the records' (a damaged cache)."""
    import lance

    blob = {}
    for video_id, frames in videos:
        for f in range(frames):
            blob[(video_id, f)] = cv2.imencode(".webp", np.full((8, 8, 3), 50 * video_id + 10 * f, np.uint8),
                                               [int(cv2.IMWRITE_WEBP_QUALITY), 100])[1].tobytes()
    rows = rows if rows is not None else list(blob)
    table = pa.table({"video_id": pa.array([r[0] for r in rows], pa.int32()),
                      "frame_idx": pa.array([r[1] for r in rows], pa.int32()),
                      "bytes": pa.array([blob[r] for r in rows], pa.large_binary())})
    lance.write_dataset(table, str(directory), mode="create")
    records, start = [], 0
    for video_id, frames in videos:
        records.append({"id": video_id, "key": f"v{video_id}", "path": f"v{video_id}.mp4", "checksum": None,
                        "T": frames, "H": 8, "W": 8, "start_row": start, "metadata": {"label": video_id}})
        start += frames
    meta = {"cache_format_version": 1, "format": "lance", "layout": "lance-video-frames",
            "schema_fingerprint": "0123456789abcdef", "num_rows": start, "total_rows": start, "n_videos": len(records),
            "n_skipped": 0, "encoding": "webp", "quality": 100, "resize": None, "video_column": "video",
            "videos": records}
    (directory / "_metadata.json").write_text(json.dumps(meta))
    return directory


def _greys(ds) -> list[list[int]]:
    """Each window's frames as 5 * video + frame (their grey / 10: WebP is lossy by a level or two)."""
    return [[round(float(frame.mean()) / 10) for frame in row["video"]] for row in ds]


def test_upstream_frames_are_matched_by_video_id_not_start_row_alone(tmp_path):
    """The records say video 0 then video 1 (3 frames each, start_row 0 and 3), but the Lance rows hold video 1's
    frames first: served by start_row, video 0's windows showed video 1's frames. Refused, naming the video."""
    cache = _frames_cache(tmp_path / "frames", [(0, 3), (1, 3)],
                          rows=[(1, 0), (1, 1), (1, 2), (0, 0), (0, 1), (0, 2)])
    with pytest.raises(CacheError, match=r"videos\[0\]: start_row is 0, expected 3 \(where the frames of video_id 0 "
                                         r"are in the frame dataset\)"):
        sds.open_cache(cache, window_length=3)
    shuffled = _frames_cache(tmp_path / "shuffled", [(0, 3), (1, 3)],
                             rows=[(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)])
    with pytest.raises(CacheError, match=r"videos\[0\]: the frames of video_id 0 are not one run of rows"):
        sds.open_cache(shuffled, window_length=3)
    out_of_order = _frames_cache(tmp_path / "order", [(0, 3)], rows=[(0, 1), (0, 0), (0, 2)])
    with pytest.raises(CacheError, match=r"videos\[0\]: the frames of video_id 0 are not stored in frame_idx order "
                                         r"0\.\.2 \(row 0 holds frame 1\)"):
        sds.open_cache(out_of_order, window_length=3)
    good = _frames_cache(tmp_path / "good", [(0, 3), (1, 3)])
    assert _greys(sds.open_cache(good, window_length=3)) == [[0, 1, 2], [5, 6, 7]]


def test_a_claimed_frame_count_is_checked_against_the_rows_before_anything_is_allocated(tmp_path):
    cache = _frames_cache(tmp_path / "frames", [(0, 3)])
    meta = json.loads((cache / "_metadata.json").read_text())
    meta["videos"][0]["T"] = 10**15  # a window count, an index array of this size: memory the machine lacks
    (cache / "_metadata.json").write_text(json.dumps(meta))
    with pytest.raises(CacheError, match=r"the videos claim 1000000000000000 frames; the frame dataset holds 3 rows"):
        sds.open_cache(cache, window_length=3)


def test_a_zero_frame_video_opens_and_migrates(tmp_path):
    from stable_datasets.layouts.open import verify_cache
    from stable_datasets.migrate import migrate_cache

    cache = _frames_cache(tmp_path / "up" / "clips_default_train_0123456789abcdef", [(0, 3), (1, 0), (2, 4)])
    theirs = sds.open_cache(cache, window_length=3)
    assert _greys(theirs) == [[0, 1, 2], [10, 11, 12]]
    migrated = migrate_cache(cache, tmp_path / "ours")
    assert migrated.num_rows == 3
    ours = sds.open_cache(tmp_path / "ours", window_length=3)
    assert _greys(ours) == _greys(theirs) and verify_cache(tmp_path / "ours") == []
    assert [v["frames"] for v in ours.cache_metadata[0].extra["videos"]] == [3, 0, 4]


def test_migrate_refuses_what_every_read_refuses(tmp_path):
    from stable_datasets.migrate import migrate_cache

    cache = _frames_cache(tmp_path / "up" / "clips_default_train_0123456789abcdef", [(0, 3), (1, 3)],
                          rows=[(1, 0), (1, 1), (1, 2), (0, 0), (0, 1), (0, 2)])
    with pytest.raises(CacheError, match=r"videos\[0\]: start_row is 0, expected 3"):
        migrate_cache(cache, tmp_path / "ours")
    assert not (tmp_path / "ours").exists()
