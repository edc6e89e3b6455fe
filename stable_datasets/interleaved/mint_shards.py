"""Small MINT-1T-style WebDataset shards made offline from real data, for tests, docs and benchmarks.

Documents alternate paragraphs of Python's own documentation (`pydoc_data.topics`) with
images of scikit-learn's handwritten digits (PNG members). Every `tiff_every`-th document
is laid out like a MINT-1T PDF document instead: its image tokens (`page_{n}_image_0`, not
member names) resolve to the document's one multi-frame TIFF, `{key}.tiff`, whose frame k is
the k-th image. The
layout: `{key}.json` with `texts` / `images` lists aligned by position and metadata fields
(`url`, `score`, `tags`, ...), and `{key}.{n}.png` members named in full by their tokens.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import cv2
import numpy as np


def _digits() -> np.ndarray:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("making MINT-style shards needs scikit-learn: pip install scikit-learn") from None
    images = np.round(load_digits().images * (255 / 16)).astype(np.uint8)
    return np.stack([cv2.resize(im, (32, 32), interpolation=cv2.INTER_NEAREST) for im in images])


def _paragraphs() -> list[str]:
    from pydoc_data.topics import topics

    out = []
    for name in sorted(topics):
        out.extend(p.strip() for p in topics[name].split("\n\n") if len(p.strip()) > 60)
    return out


def write_mint_shards(folder: str | Path, *, num_samples: int = 100, samples_per_shard: int = 50,
                      tiff_every: int = 10, seed: int = 0) -> list[Path]:
    """Write shards `shard-NNNNN.tar` into `folder`; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    digits, paragraphs = _digits(), _paragraphs()
    paths: list[Path] = []
    tar = None
    for n in range(num_samples):
        if n % samples_per_shard == 0:
            if tar is not None:
                tar.close()
            paths.append(folder / f"shard-{n // samples_per_shard:05d}.tar")
            tar = tarfile.open(paths[-1], "w")  # noqa: SIM115 - closed when the next shard starts
        key = f"doc{n:06d}"
        length = int(rng.integers(3, 9))
        texts: list[str | None] = []
        images: list[str | None] = []
        members: list[tuple[str, bytes]] = []
        pdf_like = bool(tiff_every) and n % tiff_every == 0
        pages: list[np.ndarray] = []
        for position in range(length):
            if position % 2 == 1:
                digit = digits[int(rng.integers(len(digits)))]
                texts.append(None)
                if pdf_like:
                    images.append(f"page_{len(pages)}_image_0")
                    pages.append(digit)
                else:
                    images.append(f"{key}.{position}.png")
                    members.append((images[-1], cv2.imencode(".png", digit)[1].tobytes()))
            else:
                texts.append(paragraphs[int(rng.integers(len(paragraphs)))])
                images.append(None)
        if pages:
            members.append((f"{key}.tiff", cv2.imencodemulti(".tiff", pages)[1].tobytes()))
        record = {"texts": texts, "images": images, "url": f"https://example.org/{key}",
                  "score": round(float(rng.random()), 4), "tags": ["python", "digits"][: int(rng.integers(1, 3))],
                  "language": "en"}
        for name, data in [(f"{key}.json", json.dumps(record).encode()), *members]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    if tar is not None:
        tar.close()
    return paths
