"""`stable_datasets.upstream`: upstream stable-datasets' cache.py names over our code (issue 25 item 1).

Inputs and expected values follow upstream's own cache.py and its test
`test_lance_video_frames_cache_segment_roundtrip` (a 5-frame 12x12 video, window 3, hop 2).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets import upstream
from stable_datasets.features import ClassLabel, Features, Image, Sequence, Value, Video
from tests.upstream_caches import digit_images, write_tiny_video, write_upstream_cache, write_upstream_lance_cache

FEATURES = Features({"image": Image(), "label": ClassLabel(names=[str(i) for i in range(10)]),
                     "tokens": Sequence(Value("int64"))})


def _examples(n):
    for i, digit in enumerate(digit_images(n)):
        yield f"key-{i}", {"image": digit, "label": i % 10, "tokens": [i, i + 1]}


def test_cache_fingerprint_is_upstreams_folder_name():
    assert upstream.cache_fingerprint("MNIST", "1.0.0", "default", "train") == "mnist_default_train_6693baecdb80c4be"
    assert upstream.cache_fingerprint("MNIST", "1.0.0", "default", "train", storage_format="lance") == \
        "mnist_default_train_a24bfbdf740ccb94"


def test_encode_example_passes_unknown_keys_through():
    encoded = upstream.encode_example({"label": np.int64(3), "tokens": np.array([1, 2]), "score": np.float32(0.5),
                                       "note": "kept"}, FEATURES)
    assert {k: v for k, v in encoded.items() if k != "tokens"} == {"label": 3, "score": 0.5, "note": "kept"}
    assert type(encoded["score"]) is float and list(encoded["tokens"]) == [1, 2]  # our encoders keep arrays


def test_write_sharded_arrow_cache_then_open_it_the_upstream_way(tmp_path):
    meta = upstream.write_sharded_arrow_cache(_examples(12), FEATURES, tmp_path / "digits", batch_size=5)
    assert isinstance(meta, upstream.ShardedCacheMeta)
    assert (meta.num_rows, meta.num_shards, meta.shard_row_counts, meta.compression) == (12, 1, [12], None)
    assert upstream.read_shard(meta.shard_paths[0]).num_rows == 12
    assert upstream.detect_cache_layout(tmp_path / "digits") == "arrow-shards"
    assert upstream.detect_cache_format(tmp_path / "digits") == "arrow"
    assert upstream.validate_sharded_cache(tmp_path / "digits", FEATURES).num_rows == 12
    with pytest.raises(ValueError, match="Schema fingerprint mismatch: cache has [0-9a-f]{16}, expected"):
        upstream.validate_sharded_cache(tmp_path / "digits", Features({"label": Value("int64")}))
    opened = upstream.open_cache(tmp_path / "digits", FEATURES)
    assert (opened.layout, opened.num_rows) == ("arrow-shards", 12)
    assert isinstance(opened.backend, sds.StableDataset) and opened.metadata.shard_row_counts == [12]
    row = opened.backend[7]
    assert row["label"] == 7 and row["tokens"] == [7, 8] and row["image"].shape == (8, 8, 3)
    # small shards and compression, as upstream's keywords say
    many = upstream.write_sharded_arrow_cache(_examples(12), FEATURES, tmp_path / "many", shard_size_bytes=300,
                                              batch_size=4, compression="zstd")
    assert many.num_shards > 1 and sum(many.shard_row_counts) == 12 and many.compression == "zstd"
    assert [r["tokens"][0] for r in upstream.open_cache(tmp_path / "many", FEATURES).backend] == list(range(12))
    # writing again replaces the cache, as upstream does
    again = upstream.write_sharded_arrow_cache(_examples(3), FEATURES, tmp_path / "digits")
    assert again.num_rows == 3 and len(sds.open_cache(tmp_path / "digits")) == 3


def test_ported_upstream_cases_empty_write_deleted_shard_and_compression(tmp_path):
    """Upstream's own expectations (issue 37 item 5): an empty write has no shards; reading the metadata of our
    cache notices a deleted shard and reports the codec it was written with."""
    empty = upstream.write_sharded_arrow_cache(iter([]), FEATURES, tmp_path / "empty")
    assert (empty.num_rows, empty.num_shards, empty.shard_filenames, empty.shard_row_counts) == (0, 0, [], [])
    again = upstream.read_sharded_cache_meta(tmp_path / "empty")
    assert (again.num_rows, again.num_shards, again.shard_row_counts) == (0, 0, [])
    many = upstream.write_sharded_arrow_cache(_examples(12), FEATURES, tmp_path / "many", shard_size_bytes=300,
                                              batch_size=4, compression="zstd")
    read = upstream.read_sharded_cache_meta(tmp_path / "many")
    assert (read.compression, read.shard_row_counts) == ("zstd", many.shard_row_counts)
    assert upstream.read_sharded_cache_meta(tmp_path / "empty").compression is None
    (tmp_path / "many" / many.shard_filenames[1]).unlink()
    with pytest.raises(ValueError, match=f"Missing shard file: .*{many.shard_filenames[1]}"):
        upstream.read_sharded_cache_meta(tmp_path / "many")


def test_a_jpeg_opened_with_pil_is_stored_as_its_jpeg_bytes(tmp_path):
    """Upstream (and Hugging Face) keep an image opened from a JPEG file as JPEG, not re-encoded to PNG."""
    from PIL import Image as PILImage

    pixels = (np.arange(16 * 16 * 3) % 251).astype(np.uint8).reshape(16, 16, 3)
    PILImage.fromarray(pixels).save(tmp_path / "a.jpg", quality=80)
    jpeg = (tmp_path / "a.jpg").read_bytes()
    opened = PILImage.open(tmp_path / "a.jpg")
    encoded = upstream.encode_example({"image": opened, "label": 1, "tokens": [1]}, FEATURES)
    assert encoded["image"] == jpeg
    # not from a file any more (the file is gone): saved again as JPEG with the file's own tables
    in_memory = PILImage.open(io.BytesIO(jpeg))
    stored = Image().encode(in_memory, "image")
    again = PILImage.open(io.BytesIO(stored))
    assert (stored[:3], again.format, again.size) == (b"\xff\xd8\xff", "JPEG", (16, 16))
    resized = PILImage.open(tmp_path / "a.jpg")
    resized.thumbnail((8, 8))  # changed in place after opening: its pixels, not the file's bytes
    assert PILImage.open(io.BytesIO(Image().encode(resized, "image"))).size == (8, 8)
    made = PILImage.fromarray(pixels)  # made in memory: encoded as the feature says (PNG)
    assert Image().encode(made, "image")[:4] == b"\x89PNG"


def test_caches_written_by_upstream_open_through_the_upstream_names(tmp_path):
    arrow = write_upstream_cache(tmp_path / "mnist_default_train_abc", [3, 4])
    columns = Features({"image": Image(), "label": Value("int64"), "caption": Value("string"),
                        "tokens": Sequence(Value("int64")), "volume": Value("binary")})
    opened = upstream.open_cache(arrow, columns)
    assert (opened.layout, opened.num_rows) == ("arrow-shards", 7)
    assert opened.metadata.shard_filenames == ["shard-00000.arrow", "shard-00001.arrow"]
    assert opened.metadata.schema_fingerprint == "0123456789abcdef"
    assert opened.backend[5]["caption"] == "digit 5"
    with pytest.raises(ValueError, match=r"Schema fingerprint mismatch: cache has columns \['image', 'label', "):
        upstream.open_cache(arrow, Features({"label": Value("int64")}))
    lance = write_upstream_lance_cache(tmp_path / "lance", 4)
    opened = upstream.open_cache(lance, columns)
    assert (opened.layout, opened.num_rows, opened.metadata.num_rows) == ("lance-rows", 4, 4)
    assert upstream.detect_cache_format(lance) == "lance"
    with pytest.raises(ValueError, match="Not an Arrow sharded cache: .*format='lance'"):
        upstream.read_sharded_cache_meta(lance)
    with pytest.raises(FileNotFoundError, match="No metadata file at"):
        upstream.detect_cache_layout(tmp_path / "nowhere")


def test_upstream_metadata_errors_keep_upstreams_text(tmp_path):
    import json

    cache = write_upstream_cache(tmp_path / "c", [3, 4])
    meta = json.loads((cache / "_metadata.json").read_text())
    (cache / "_metadata.json").write_text(json.dumps({**meta, "num_rows": 8}))
    with pytest.raises(ValueError, match=r"Sum of shard_row_counts \(7\) != num_rows \(8\)"):
        upstream.read_sharded_cache_meta(cache)
    (cache / "_metadata.json").write_text(json.dumps({**meta, "cache_format_version": 3}))
    with pytest.raises(ValueError, match=r"Unsupported cache format version 3 \(expected 1\)"):
        upstream.read_sharded_cache_meta(cache)
    (cache / "shard-00001.arrow").unlink()
    (cache / "_metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="Missing shard file: .*shard-00001.arrow"):
        upstream.read_sharded_cache_meta(cache)


def test_write_lance_cache(tmp_path):
    meta = upstream.write_lance_cache(_examples(6), FEATURES, tmp_path / "lance", batch_size=4)
    assert isinstance(meta, upstream.LanceCacheMeta) and meta.num_rows == 6
    assert upstream.detect_cache_layout(tmp_path / "lance") == "lance-rows"
    assert upstream.read_lance_cache_meta(tmp_path / "lance").num_rows == 6
    opened = upstream.open_cache(tmp_path / "lance", FEATURES, backend_kwargs={"batch_readahead": 4})
    assert opened.layout == "lance-rows" and opened.backend[4]["tokens"] == [4, 5]


def test_write_lance_video_frames_cache_segment_roundtrip(tmp_path):
    video_path = write_tiny_video(tmp_path / "tiny.mp4", frames=5, size=12)
    features = Features({"video": Video(storage="frames"), "label": Value("int32")})

    def gen():
        yield "tiny", {"video": video_path, "label": 3}

    meta = upstream.write_lance_video_frames_cache(gen(), features, tmp_path / "frames", workers=1)
    assert meta.num_rows == 5 and meta.cache_dir == tmp_path / "frames"  # frames, as upstream counts them
    opened = upstream.open_cache(meta.cache_dir, features, backend_kwargs={"window_length": 3, "hop_size": 2})
    assert opened.layout == "lance-video-frames" and opened.num_rows == 2
    ds = opened.backend
    row = ds[0]
    assert row["video"].shape == (3, 12, 12, 3) and row["frame_indices"] == [0, 1, 2] and row["label"] == 3
    assert list(ds)[1]["frame_indices"] == [2, 3, 4]
    every = upstream.open_cache(meta.cache_dir, features).backend  # upstream's defaults: each frame alone
    assert len(every) == 5 and every[4]["frame_indices"] == [4]
    skipping = upstream.open_cache(meta.cache_dir, features, backend_kwargs={"window_length": 2, "frame_skip": 1})
    assert [r["frame_indices"] for r in skipping.backend] == [[0, 2], [1, 3], [2, 4]]
    with pytest.raises(TypeError, match=r"unknown backend_kwargs \['stride'\]"):
        upstream.open_cache(meta.cache_dir, features, backend_kwargs={"stride": 2})


def test_write_lance_video_frames_cache_errors(tmp_path):
    features = Features({"video": Video(storage="frames"), "label": Value("int32")})
    with pytest.raises(ValueError, match="Cannot build a lance-video-frames cache from an empty generator."):
        upstream.write_lance_video_frames_cache(iter(()), features, tmp_path / "empty")
    assert not (tmp_path / "empty").exists()
    with pytest.raises(ValueError, match=r"requires exactly one Video\(storage='frames'\) column"):
        upstream.write_lance_video_frames_cache(iter(()), Features({"label": Value("int32")}), tmp_path / "x")
    with pytest.raises(TypeError, match=r"'label' must be a Video\(storage='frames'\) feature."):
        upstream.write_lance_video_frames_cache(iter(()), features, tmp_path / "x", video_column="label")
