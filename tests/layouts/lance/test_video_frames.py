from __future__ import annotations

import glob
import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import CacheError, EncodingError, ExampleError, StableDatasetsError
from stable_datasets.features.video import count_frames, read_frames, sample_indices
from tests.stress.readers_during_rebuilds import make_clip

SMALL = {"train_videos": 6, "test_videos": 2}


@pytest.fixture
def video_file(tmp_path):
    """A real 12-frame MP4 whose frame t has a bright square at row/col 2t."""
    return make_clip(tmp_path / "clip.mp4")


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
        assert ref.path.startswith(str(ds.cache_dirs[0].parent / ".videos"))
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
    meta = ds.cache_metadata[0]
    assert len(meta.extra_files) == 6 and all(m.path.startswith("../.videos/") for m in meta.extra_files)
    victim = ds.cache_dirs[0] / meta.extra_files[0].path
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


def _frames(**kwargs):
    return sds.load_dataset("moving_digits", name="frames", split="train", **SMALL, **kwargs)


def test_frames_layout_serves_windows():
    ds = _frames()
    meta = ds.cache_metadata[0]
    assert meta.layout == "lance_video_frames"
    videos = meta.extra["videos"]
    assert meta.extra["num_videos"] == 6 and [v["frames"] for v in videos] == [20] * 6
    assert [v["first_row"] for v in videos] == [0, 20, 40, 60, 80, 100]
    assert (videos[0]["height"], videos[0]["width"]) == (64, 64)
    assert videos[0]["fps"] == 10.0 and (videos[0]["source_height"], videos[0]["source_width"]) == (64, 64)
    assert len(ds) == 6 * 2  # default window_length=8, hop=8: starts 0 and 8 in each 20-frame video
    row = ds[3]
    assert row["video"].shape == (8, 64, 64, 3) and row["video"].dtype == np.uint8
    assert (row["video_index"], row["start_frame"], row["frame_indices"]) == (1, 8, list(range(8, 16)))
    source = ds.features  # window features: the video column plus window coordinates and the other columns
    assert list(source) == ["video", "video_index", "start_frame", "frame_indices", "digits"]
    windows = ds.with_frame_windows(window_length=5, frame_stride=3, hop=2)
    span = 4 * 3 + 1
    assert len(windows) == 6 * len(range(0, 20 - span + 1, 2))
    assert windows[1]["frame_indices"] == [2, 5, 8, 11, 14]
    none = ds.with_frame_windows(window_length=8, min_video_frames=21)
    assert len(none) == 0


def test_frames_match_the_source_video():
    path_ds = sds.load_dataset("moving_digits", name="path", split="train", **SMALL)
    frames_ds = _frames()
    ref = path_ds[1]["video"]
    source = read_frames(ref.path, np.arange(8, 16))
    window = frames_ds[3]["video"]  # video 1, frames 8..15
    assert frames_ds[3]["digits"] == path_ds[1]["digits"]
    assert np.abs(source.astype(int) - window.astype(int)).mean() < 4  # WebP q90 of the same decoded frames


def test_frames_batches_formats_and_pickling():
    ds = _frames().with_frame_windows(window_length=4)
    batch = ds.__getitems__([0, 7, 3])
    assert [(b["video_index"], b["start_frame"]) for b in batch] == [(0, 0), (1, 8), (0, 12)]
    assert batch[1]["video"].shape == (4, 64, 64, 3)
    raw = ds.with_format("python", decode=False)[0]["video"]
    assert len(raw) == 4 and raw[0][:4] == b"RIFF" and raw[0][8:12] == b"WEBP"
    again = pickle.loads(pickle.dumps(ds))
    assert len(again) == len(ds)
    np.testing.assert_array_equal(again[5]["video"], ds[5]["video"])
    assert [r["video_index"] for r in ds.shuffle(seed=0)][:3] == ds.shuffle(seed=0)["video_index"][:3]
    with pytest.raises(ValueError, match="call it before select"):
        ds.shuffle(seed=0).with_frame_windows(window_length=2)
    with pytest.raises(ValueError, match=r"unknown video window option\(s\) \['stride'\]"):
        sds.open_cache(ds.cache_dirs[0], stride=2)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_frames_in_dataloader_workers(method):
    torch = pytest.importorskip("torch")
    import multiprocessing

    ds = _frames().with_frame_windows(window_length=4).with_format("torch", columns=["video", "video_index"])
    ds[0]
    loader = torch.utils.data.DataLoader(ds, batch_size=5, num_workers=2,
                                         multiprocessing_context=multiprocessing.get_context(method))
    batches = list(loader)
    assert batches[0]["video"].shape == (5, 4, 64, 64, 3)
    assert torch.cat([b["video_index"] for b in batches]).tolist() == ds.with_format("python")["video_index"]


def test_frame_resize_keeps_aspect_ratio():
    ds = _frames(layout_options={"frame_resize": 32, "webp_quality": 70})
    assert ds[0]["video"].shape == (8, 32, 32, 3)
    record = ds.cache_metadata[0].extra["videos"][0]
    assert (record["height"], record["width"], record["source_height"], record["source_width"]) == (32, 32, 64, 64)


def test_video_encoding_keeps_a_bounded_number_of_videos_in_flight():
    """Workers run at most `ahead` videos past the one the writer is consuming."""
    import threading
    import time
    from multiprocessing.pool import ThreadPool

    from stable_datasets.layouts.lance.video_frames import ordered_bounded_map

    started: list[int] = []
    lock = threading.Lock()

    def work(item):
        with lock:
            started.append(item)
        time.sleep(0.001 * (item % 3))
        return item * 10

    seen_ahead = []
    with ThreadPool(4) as pool:
        results = []
        for value in ordered_bounded_map(pool, work, range(40), ahead=3):
            time.sleep(0.005)  # a slow consumer: without the bound, every item would have started
            with lock:
                seen_ahead.append(len(started) - len(results))
            results.append(value)
    assert results == [i * 10 for i in range(40)]
    assert max(seen_ahead) <= 3 + 1 and sorted(started) == list(range(40))


def test_verify_counts_stored_frames_not_windows():
    from stable_datasets.layouts.open import verify_cache

    ds = _frames()
    frames = sum(v["frames"] for v in ds.cache_metadata[0].extra["videos"])
    assert frames == 6 * 20 and len(ds) != frames
    assert ds.backends[0].stored_row_counts() == (frames, frames)
    assert verify_cache(ds.cache_dirs[0]) == []


def test_lossless_frames_equal_the_decoded_source_video():
    windows = _frames(layout_options={"webp_quality": "lossless"}).with_frame_windows(window_length=8, hop=4)
    files = [ref.path for ref in sds.load_dataset("moving_digits", name="path", split="train", **SMALL)["video"]]
    for row in (0, 5):
        w = windows[row]
        assert np.array_equal(w["video"], read_frames(files[w["video_index"]], np.asarray(w["frame_indices"])))


@pytest.mark.parametrize("threads", ["1", "3"])
def test_frame_batches_across_lance_fragments_are_exact(monkeypatch, threads):
    """Small Lance files put windows across fragment boundaries; overlapping and repeated windows
    in one batch still get exactly the source frames, whatever the number of decode threads."""
    monkeypatch.setenv("STABLE_DATASETS_DECODE_THREADS", threads)
    options = {"webp_quality": "lossless", "max_rows_per_file": 7, "max_rows_per_group": 3}
    windows = _frames(layout_options=options).with_frame_windows(window_length=6, hop=1)
    backend = windows.backends[0]
    backend.ensure_open()
    assert len(backend._frame_rows.fragments) == 18  # 120 frames in files of 7 rows
    files = [ref.path for ref in sds.load_dataset("moving_digits", name="path", split="train", **SMALL)["video"]]
    picks = [44, 3, 4, 3, len(windows) - 1, 0, 20, 21, 22, 44]
    batch = windows.__getitems__(picks)
    for pick, row in zip(picks, batch):
        assert row["frame_indices"] == windows[pick]["frame_indices"]
        expected = read_frames(files[row["video_index"]], np.asarray(row["frame_indices"]))
        assert np.array_equal(row["video"], expected), pick


def test_decode_threads_share_the_cores_among_dataloader_workers(monkeypatch):
    import types

    torch_data = pytest.importorskip("torch.utils.data")
    from stable_datasets.features import video

    monkeypatch.delenv("STABLE_DATASETS_DECODE_THREADS", raising=False)
    monkeypatch.setattr(video.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert video.decode_threads() == 4  # at most 4 outside workers
    for workers, threads in ((1, 4), (2, 4), (3, 2), (8, 1), (16, 1)):
        info = types.SimpleNamespace(num_workers=workers)
        monkeypatch.setattr(torch_data, "get_worker_info", lambda info=info: info)
        assert video.decode_threads() == threads, workers
    monkeypatch.setenv("STABLE_DATASETS_DECODE_THREADS", "3")
    assert video.decode_threads() == 3


def test_a_window_with_frames_of_different_sizes_is_refused():
    import cv2

    from stable_datasets.features.video import decode_window

    small, large = (cv2.imencode(".webp", np.zeros((h, 8, 3), np.uint8))[1] for h in (8, 16))
    assert decode_window([small, small]).shape == (2, 8, 8, 3)
    with pytest.raises(ValueError, match=r"stored frame 1 of a window is \(16, 8\), frame 0 is \(8, 8\)"):
        decode_window([small, large])


@pytest.mark.parametrize("quality", [0, 101, 90.5, "best", True])
def test_bad_webp_quality_is_rejected_before_building(quality):
    with pytest.raises(ValueError, match=r"webp_quality must be an int from 1 to 100 or 'lossless', got"):
        _frames(layout_options={"webp_quality": quality})


@pytest.mark.parametrize("resize", [0, [32], [32, 0], "48", 32.0])
def test_bad_frame_resize_is_rejected(resize):
    with pytest.raises(ValueError, match=r"frame_resize must be None, a positive int \(the shorter side\) or"):
        _frames(layout_options={"frame_resize": resize})


def _corrupt_builder(write_builder, tmp_path):
    good = sds.load_dataset("moving_digits", name="path", split="test", **SMALL)[0]["video"].path
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(Path(good).read_bytes()[:200])  # a valid header, then nothing decodable
    return write_builder("vids", f"""
import stable_datasets as sds

class Vids(sds.GeneratorBasedBuilder):
    def _info(self):
        return sds.DatasetInfo(features={{"video": sds.Video(storage="frames"), "n": sds.Value("int32")}})
    def _split_generators(self, dl_manager):
        return [sds.SplitGenerator("train")]
    def _generate_examples(self):
        yield "a", {{"video": {good!r}, "n": 1}}
        yield "b", {{"video": {str(broken)!r}, "n": 2}}
        yield "c", {{"video": {good!r}, "n": 3}}
"""), broken


def test_corrupt_videos_are_skipped_and_counted(write_builder, tmp_path):
    script, _ = _corrupt_builder(write_builder, tmp_path)
    ds = sds.load_dataset(str(script), split="train").with_frame_windows(window_length=20)
    meta = ds.cache_metadata[0]
    assert meta.extra["skipped_videos"] == 1 and meta.extra["num_videos"] == 2
    assert ds["n"] == [1, 3]


def test_corrupt_videos_fail_when_asked(write_builder, tmp_path, cache_root):
    script, broken = _corrupt_builder(write_builder, tmp_path)
    with pytest.raises(StableDatasetsError, match=f"video {broken} could not be decoded: "):
        sds.load_dataset(str(script), split="train", layout_options={"skip_corrupt": False})
    assert not [p for p in cache_root.rglob("_metadata.json") if "vids" in str(p)]


def test_frames_build_from_a_script_without_main_guard(tmp_path, cache_root):
    """Spawn-style workers would re-run this script in every worker; the build must not."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text("import stable_datasets as sds\n"
                      "ds = sds.load_dataset('moving_digits', name='frames', split='test', train_videos=2, "
                      "test_videos=3)\nprint('rows', len(ds))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "STABLE_DATASETS_CACHE_DIR": str(cache_root)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "rows 6"


def test_concatenated_path_video_caches_keep_each_cache_media_folder():
    first = sds.load_dataset("moving_digits", name="path", split="train", **SMALL)
    second = sds.load_dataset("moving_digits", name="path", split="train", seed=1, **SMALL)
    assert first.cache_dirs[0].parent != second.cache_dirs[0].parent  # two fingerprints, two media folders
    both = sds.concatenate_datasets([first, second])
    refs = both["video"]
    assert len(refs) == 12
    for ref, cache in zip(refs, [first] * 6 + [second] * 6):
        assert Path(ref.path).is_file() and Path(ref.path).parent.parent == cache.cache_dirs[0].parent
        assert hashlib.sha256(Path(ref.path).read_bytes()).hexdigest() == ref.checksum
    assert both[7]["video"] == second[1]["video"] and both[[7, 0]]["video"] == [second[1]["video"], first[0]["video"]]
    order = np.random.default_rng(2).permutation(12)
    assert [r["video"].path for r in both.shuffle(seed=2)] == [refs[i].path for i in order]


def test_frame_windows_have_their_own_feature_and_only_frame_caches_serve_them():
    from stable_datasets.features.video import VideoWindow

    frames = _frames()
    assert frames.features["video"] == VideoWindow() and frames.cache_metadata[0].features["video"] == {
        "_type": "Video", "storage": "frames"}
    raw = frames.with_format("python", decode=False)[0]["video"]
    assert isinstance(raw, list) and raw[0][:4] == b"RIFF"  # WebP frames, undecoded
    with pytest.raises(ValueError, match="needs a cache that serves frame windows"):
        sds.load_dataset("moving_digits", name="bytes", split="train", **SMALL).with_frame_windows(window_length=4)


def test_a_column_view_of_a_frames_cache_serves_its_windows():
    """select_columns made a view counting the cache's stored videos (6) instead of its windows (12)."""
    ds = _frames()
    some = ds.select_columns(["video_index", "start_frame"])
    assert len(some) == len(ds) == 12
    assert some[3] == {"video_index": 1, "start_frame": 8}
    assert some["start_frame"][:4] == [0, 8, 0, 8]


OPENCV_THREADS_THEN_FRAMES = """
import sys
import cv2, numpy as np
import stable_datasets as sds
cv2.setNumThreads(2)
image = np.random.default_rng(0).integers(0, 255, (2000, 2000, 3), dtype=np.uint8)
for _ in range(3):
    cv2.GaussianBlur(image, (31, 31), 0)  # OpenCV's own thread pool now runs in this process
ds = sds.load_dataset("moving_digits", name="frames", split="train", train_videos=3, test_videos=1,
                      cache_dir=sys.argv[1])
print(len(ds), cv2.getNumThreads())
"""


def test_a_frames_build_after_parallel_opencv_work_does_not_hang(tmp_path):
    """The frame encoders are forked: before, a child inherited OpenCV's thread pool without its threads and
    hung in its first cv2.setNumThreads (the build waited forever). The parent keeps its own thread count."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", OPENCV_THREADS_THEN_FRAMES, str(tmp_path)], capture_output=True,
                         text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["6", "2"]
