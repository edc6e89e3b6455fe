from __future__ import annotations

import glob
import os
import pickle
import tempfile

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError, EncodingError, ExampleError
from stable_datasets.features.video import count_frames, read_frames, sample_indices

SMALL = {"train_videos": 6, "test_videos": 2}


@pytest.fixture
def video_file(tmp_path):
    """A real 12-frame MP4 whose frame t has a bright square at row/col 2t."""
    import cv2

    path = tmp_path / "clip.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (48, 32), True)
    for t in range(12):
        frame = np.zeros((32, 48, 3), np.uint8)
        frame[2 * t:2 * t + 6, 2 * t:2 * t + 6] = 255
        writer.write(frame)
    writer.release()
    return path


def test_read_frames_and_sampling(video_file):
    assert count_frames(str(video_file)) == 12
    frames = read_frames(str(video_file), np.array([5, 0, 5, 11]))
    assert frames.shape == (4, 32, 48, 3) and frames.dtype == np.uint8
    assert frames[0, 12:16, 12:16].mean() > 200 and frames[1, 12:16, 12:16].mean() < 50  # frame 5 vs frame 0
    np.testing.assert_array_equal(frames[0], frames[2])
    uniform = sds.VideoDecodeConfig(num_frames=4)
    assert sample_indices(12, uniform, np.random.default_rng(0)).tolist() == [0, 4, 7, 11]
    clip = sds.VideoDecodeConfig(num_frames=3, sampling="random", frame_stride=2)
    picked = sample_indices(12, clip, np.random.default_rng(0))
    assert np.all(np.diff(picked) == 2) and 0 <= picked[0] <= 7
    assert sample_indices(3, clip, np.random.default_rng(0)).tolist() == [0, 2, 2]  # short video: repeat last
    assert read_frames(str(video_file), np.array([0]), resize=16).shape == (1, 16, 24, 3)


@pytest.mark.parametrize("storage", ["path", "bytes"])
def test_moving_digits_storage_modes(storage):
    ds = sds.load_dataset("moving_digits", name=storage, split="train", **SMALL)
    assert len(ds) == 6
    row = ds[0]
    ref = row["video"]
    assert isinstance(ref, sds.VideoRef) and ref.extension == "mp4" and ref.media_type == "video/mp4"
    assert len(row["digits"]) == 2 and all(0 <= d < 10 for d in row["digits"])
    data = ref.read_bytes()
    assert len(data) == ref.size and data[4:8] == b"ftyp"
    import hashlib

    assert hashlib.sha256(data).hexdigest() == ref.checksum
    if storage == "path":
        assert ref.bytes is None and os.path.isfile(ref.path)
        assert ref.path.startswith(str(ds.cache_dirs[0].parent / "videos"))
    else:
        assert ref.path is None and ref.bytes is not None
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "sds-video-*")))
    decoded = ds.with_video_decode(sds.VideoDecodeConfig(num_frames=5, layout="TCHW"))
    frames = decoded[0]["video"]
    assert frames.shape == (5, 3, 64, 64) and frames.dtype == np.uint8
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "sds-video-*"))) == before  # no temp files leak
    again = pickle.loads(pickle.dumps(decoded))
    np.testing.assert_array_equal(again[0]["video"], frames)


def test_path_storage_lists_and_checks_media_files(tmp_path):
    ds = sds.load_dataset("moving_digits", split="train", **SMALL)
    meta = ds._backends[0].metadata
    assert len(meta.media) == 6 and all(m.path.startswith("../videos/") for m in meta.media)
    victim = ds.cache_dirs[0] / meta.media[0].path
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(CacheError, match=r"videos/.*\.mp4: shard is 100 bytes"):
        sds.open_cache(ds.cache_dirs[0])


def test_random_sampling_is_seeded_and_torch_output():
    torch = pytest.importorskip("torch")
    ds = sds.load_dataset("moving_digits", name="bytes", split="test", **SMALL)
    config = sds.VideoDecodeConfig(num_frames=4, sampling="random", frame_stride=3, seed=7, output="torch")
    a, b = ds.with_video_decode(config), ds.with_video_decode(config)
    assert isinstance(a[1]["video"], torch.Tensor)
    assert torch.equal(a[1]["video"], b[1]["video"])
    ds.set_video_decode(sds.VideoDecodeConfig(num_frames=2))
    assert ds[0]["video"].shape == (2, 64, 64, 3)


def test_bad_videos_are_refused(write_builder, tmp_path):
    bogus = tmp_path / "not_a_video.mp4"
    bogus.write_bytes(b"hello, I am text")
    path = write_builder("vids", f"""
import stable_datasets as sds

class Vids(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features={{"video": sds.Video()}})
    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train")]
    def _generate_examples(self):
        yield "bad", {{"video": {str(bogus)!r}}}
""")
    with pytest.raises(ExampleError, match="field 'video': .*not_a_video.mp4' is not a recognised video file"):
        sds.load_dataset(str(path), split="train")
    with pytest.raises(EncodingError, match="can only be encoded while building a cache"):
        sds.Video().encode(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 40, "v")
    with pytest.raises(ValueError, match="Video storage must be one of"):
        sds.Video(storage="cloud")
