"""Data folders: which files a loader reads from a folder, which split each belongs to, and which
loader a folder of files needs (`load_dataset("path/to/folder")`).

Splits come from names, as Hugging Face names them: a folder or file name holding the word
train/training, validation/valid/val/dev, or test/testing/eval (split at non-letters, so
"my_train_01.csv" is train and "contest.csv" is not). Files with no split word are "train";
with no split word anywhere, every file is "train".
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from loguru import logger

from stable_datasets.interleaved.tar_format import TAR_SUFFIXES
from stable_datasets.loaders.compressed import COMPRESSION_SUFFIXES

SPLIT_WORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test", "testing", "eval", "evaluation"),
}
_WORD_TO_SPLIT = {word: split for split, words in SPLIT_WORDS.items() for word in words}

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mkv", ".webm", ".mov", ".m4v")
#: loader for each file ending, for folders whose format is inferred
FORMAT_OF_EXTENSION = {
    ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json",
    ".parquet": "parquet", ".arrow": "arrow", ".txt": "text", ".tar": "webdataset",
    **{ext: "imagefolder" for ext in IMAGE_EXTENSIONS}, **{ext: "videofolder" for ext in VIDEO_EXTENSIONS},
}
METADATA_FILES = ("metadata.csv", "metadata.jsonl")
MEDIA_EXTENSIONS = IMAGE_EXTENSIONS + VIDEO_EXTENSIONS


def list_files(folder: str) -> list[str]:
    """Every non-hidden file under `folder`, sorted by path; a folder reached again through a
    symlink (a loop) is listed once."""
    found: list[str] = []
    stack = [folder]
    walked = {os.path.realpath(folder)}
    while stack:
        current = stack.pop()
        with os.scandir(current) as entries:
            for entry in entries:
                if entry.name.startswith((".", "__")):
                    continue
                if entry.is_dir():
                    # by real path: `folder` may be relative, and a link may point back at a folder walked by name
                    real = os.path.realpath(entry.path)
                    if real in walked:
                        continue
                    walked.add(real)
                    stack.append(entry.path)
                elif entry.is_file():
                    found.append(entry.path)
    return sorted(found)


def split_of(relative: str) -> str | None:
    for part in relative.replace(os.sep, "/").split("/"):
        stem = part.split(".")[0].lower()
        for word in re.split(r"[^a-z]+", stem):
            if word in _WORD_TO_SPLIT:
                return _WORD_TO_SPLIT[word]
    return None


def infer_data_files(data_dir: str | os.PathLike, names: tuple[str, ...], builder: str) -> dict[str, list[str]]:
    """split -> the files under `data_dir` whose names end with one of `names` (case-insensitive)."""
    folder = os.fspath(data_dir)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"the '{builder}' loader: data_dir {folder} is not a folder")
    lowered = tuple(n.lower() for n in names)
    files = [p for p in list_files(folder) if p.lower().endswith(lowered)]
    if not files:
        raise FileNotFoundError(f"the '{builder}' loader found no file ending with {'/'.join(names)} in {folder}")
    splits: dict[str, list[str]] = {}
    for path in files:
        split = split_of(os.path.relpath(os.path.dirname(path), folder)) if _is_metadata(path) else \
            split_of(os.path.relpath(path, folder))
        splits.setdefault(split or "train", []).append(path)
    order = [s for s in SPLIT_WORDS if s in splits]
    return {s: splits[s] for s in order}


def _uncompressed(path: str) -> str:
    """`train.csv.gz` -> `train.csv`: a compressed data file is read as the file it holds."""
    stem, suffix = os.path.splitext(path)
    return stem if suffix.lower() in COMPRESSION_SUFFIXES else path


def _is_metadata(path: str) -> bool:
    return os.path.basename(path) in METADATA_FILES


def saved_by_hugging_face(folder: Path) -> dict[str, list[str]] | None:
    """split -> Arrow files of a folder that `datasets`' save_to_disk wrote (a Dataset: state.json
    beside its files; a DatasetDict: dataset_dict.json naming a folder per split), else None."""
    try:
        if (folder / "dataset_dict.json").is_file():
            splits = json.loads((folder / "dataset_dict.json").read_text())["splits"]
            return {str(split): _saved_files(folder / str(split)) for split in splits}
        if (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file():
            return {"train": _saved_files(folder)}
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise FileNotFoundError(f"{folder} looks like a folder saved by Hugging Face's save_to_disk, but its "
                                f"state cannot be read ({exc})") from None
    return None


def _saved_files(folder: Path) -> list[str]:
    state = json.loads((folder / "state.json").read_text())
    return [str(folder / entry["filename"]) for entry in state["_data_files"]]


def infer_folder_format(folder: str | os.PathLike) -> tuple[str, dict[str, Any]]:
    """(loader name, its extra options) for a folder of data files: the most common file kind."""
    counts: Counter[str] = Counter()
    kinds: dict[str, list[str]] = {}
    for path in list_files(os.fspath(folder)):
        if _is_metadata(path):
            continue
        extension = ".tar" if path.lower().endswith(TAR_SUFFIXES) else os.path.splitext(_uncompressed(path))[1].lower()
        if extension in MEDIA_EXTENSIONS and extension != os.path.splitext(path)[1].lower():
            continue  # a compressed image or video is no image or video file
        if extension in FORMAT_OF_EXTENSION:
            counts[extension] += 1
            kinds.setdefault(FORMAT_OF_EXTENSION[extension], []).append(path)
    if not counts:
        raise FileNotFoundError(f"{folder} holds no builder script and no data file this library reads "
                                f"({', '.join(sorted(FORMAT_OF_EXTENSION))})")
    by_loader: Counter[str] = Counter()
    for extension, count in counts.items():
        by_loader[FORMAT_OF_EXTENSION[extension]] += count
    loader = by_loader.most_common(1)[0][0]
    left_out = sorted(p for kind, paths in kinds.items() if kind != loader for p in paths)
    if left_out:
        shown = ", ".join(os.path.relpath(p, folder) for p in left_out[:5])
        logger.warning("{}: read as '{}' files (the most common kind here); {} file(s) of other kinds are left "
                       "out: {}{}; pass data_files= to choose", folder, loader, len(left_out), shown,
                       ", ..." if len(left_out) > 5 else "")
    options: dict[str, Any] = {}
    if loader == "csv" and counts[".tsv"] > counts[".csv"]:
        options["sep"] = "\t"
    return loader, options
