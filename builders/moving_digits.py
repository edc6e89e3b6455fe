"""Moving digits: Moving-MNIST-style videos made from scikit-learn's real 8x8 digits.

Two digits (upscaled to 28x28) bounce on a 64x64 canvas for 20 frames. Each video is
written as a real MP4 file with OpenCV, deterministically from the seed, then stored in
the mode the config names: "path" (the cache keeps a copy of each file), "bytes" (the
file inline in the row) or "frames" (decoded once into WebP frames in Lance).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

import stable_datasets as sds


@dataclass
class MovingDigitsConfig(sds.BuilderConfig):
    storage: str = "path"
    train_videos: int = 160
    test_videos: int = 40
    num_frames: int = 20
    canvas: int = 64
    fps: int = 10
    seed: int = 0


def _digit_sprites() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the 'moving_digits' builder needs scikit-learn: "
                          "pip install 'stable-datasets[data]'") from None
    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    sprites = np.stack([cv2.resize(im, (28, 28), interpolation=cv2.INTER_LINEAR) for im in images])
    return sprites, digits.target


def render_video(sprites: list[np.ndarray], rng: np.random.Generator, num_frames: int, canvas: int) -> np.ndarray:
    """Frames (T, H, W) of sprites moving in straight lines and bouncing off the edges."""
    size = sprites[0].shape[0]
    limit = canvas - size
    position = rng.uniform(0, limit, size=(len(sprites), 2))
    velocity = rng.uniform(-3.5, 3.5, size=(len(sprites), 2))
    frames = np.zeros((num_frames, canvas, canvas), dtype=np.uint8)
    for t in range(num_frames):
        for sprite, (y, x) in zip(sprites, position.round().astype(int)):
            region = frames[t, y:y + size, x:x + size]
            np.maximum(region, sprite, out=region)
        position += velocity
        for axis in range(2):
            low, high = position[:, axis] < 0, position[:, axis] > limit
            velocity[low | high, axis] *= -1
            position[:, axis] = np.clip(position[:, axis], 0, limit)
    return frames


def write_mp4(path: Path, frames: np.ndarray, fps: int) -> None:
    height, width = frames.shape[1:3]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height), True)
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV cannot write MP4 files here ({path})")
    try:
        for frame in frames:
            writer.write(cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR))
    finally:
        writer.release()


class MovingDigits(sds.GeneratorBasedBuilder):
    VERSION = sds.Version("1.0.0")
    BUILDER_CONFIG_CLASS = MovingDigitsConfig
    BUILDER_CONFIGS = [MovingDigitsConfig(name="path", storage="path"),
                       MovingDigitsConfig(name="bytes", storage="bytes"),
                       MovingDigitsConfig(name="frames", storage="frames")]
    DEFAULT_CONFIG_NAME = "path"

    def _info(self) -> sds.DatasetInfo:
        return sds.DatasetInfo(
            description="Two handwritten digits bouncing on a black canvas (Moving-MNIST style), as MP4 videos.",
            features=sds.Features({
                "video": sds.Video(storage=self.config.storage),
                "digits": sds.Sequence(sds.ClassLabel(names=[str(d) for d in range(10)]), length=2),
            }),
            supervised_keys=("video", "digits"),
        )

    def _split_generators(self, dl_manager: sds.DownloadManager) -> list[sds.SplitGenerator]:
        cfg = self.config
        folder = dl_manager.download_dir / "generated" / f"moving_digits-{self.fingerprint_inputs()['version']}-" \
            f"{cfg.seed}-{cfg.num_frames}-{cfg.canvas}-{cfg.fps}-{cfg.train_videos}-{cfg.test_videos}"
        index = self._render_all(folder)
        return [sds.SplitGenerator(split, {"files": [str(folder / v["file"]) for v in videos],
                                           "digits": [v["digits"] for v in videos]})
                for split, videos in index.items()]

    def _render_all(self, folder: Path) -> dict[str, list[dict]]:
        """Write every video once (deterministic from the seed); later builds reuse the files."""
        done = folder / "index.json"
        if done.exists():
            return json.loads(done.read_text())
        cfg = self.config
        folder.mkdir(parents=True, exist_ok=True)
        sprites, labels = _digit_sprites()
        rng = np.random.default_rng(cfg.seed)
        index: dict[str, list[dict]] = {}
        for split, count in (("train", cfg.train_videos), ("test", cfg.test_videos)):
            index[split] = []
            for number in range(count):
                chosen = rng.choice(len(sprites), size=2, replace=False)
                frames = render_video([sprites[c] for c in chosen], rng, cfg.num_frames, cfg.canvas)
                name = f"{split}-{number:05d}.mp4"
                write_mp4(folder / name, frames, cfg.fps)
                index[split].append({"file": name, "digits": [int(labels[c]) for c in chosen]})
        tmp = folder / "index.json.tmp"
        tmp.write_text(json.dumps(index))
        tmp.replace(done)
        return index

    def _generate_examples(self, files: list[str], digits: list[list[int]]):
        for path, pair in zip(files, digits):
            yield Path(path).stem, {"video": path, "digits": pair}
