"""The MNIST family's layout (Fashion-MNIST, KMNIST, notMNIST): an IDX file of images and one of labels per split.
A private helper (its name starts with `_`), not a dataset."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from stable_datasets.builder import SplitGenerator
from stable_datasets.catalog.formats.idx import read_idx
from stable_datasets.download import DownloadManager, RemoteFile
from stable_datasets.errors import StableDatasetsError


def idx_split_generators(dl_manager: DownloadManager, files: Mapping[str, RemoteFile],
                         splits: tuple[str, ...] = ("train", "test")) -> list[SplitGenerator]:
    """One split per `<split>_images` / `<split>_labels` pair of assets, downloaded together."""
    paths = dl_manager.download(dict(files))
    return [SplitGenerator(split, {"images": paths[f"{split}_images"], "labels": paths[f"{split}_labels"]})
            for split in splits]


def idx_examples(images: str, labels: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, {"image": (H, W) uint8, "label": int}) in the files' order; counts that differ are an error."""
    pixels, targets = read_idx(images), read_idx(labels)
    if len(pixels) != len(targets):
        raise StableDatasetsError(f"{images} holds {len(pixels)} images but {labels} holds {len(targets)} labels")
    for index, label in enumerate(targets.tolist()):
        yield index, {"image": pixels[index], "label": label}
