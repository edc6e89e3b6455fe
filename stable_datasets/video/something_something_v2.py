"""Something-Something V2 (Goyal et al., 2017): 220,847 short videos of people doing 174 kinds of actions with
everyday objects; 168,913 train / 24,777 validation / 27,157 test. Behind Qualcomm's license: a manual download.

The videos are read where they are, never extracted: from a `videos/` folder (or video files anywhere in the
folder), or from the downloaded archive parts `20bn-something-something-v2-00`, `-01`, ... read as one file
(catalog.formats.parts) when they make a zip or an uncompressed tar. Label files come from a `labels/` folder or
the labels zip, read in place. Each video is kept in the cache as a file (`Video(storage="path")`)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import posixpath
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from loguru import logger

from stable_datasets.builder import DatasetInfo, Split, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.parts import open_parts
from stable_datasets.errors import ManualDownloadError, StableDatasetsError
from stable_datasets.features import Features, Value, Video

VIDEO_SUFFIXES = (".webm", ".mp4", ".mkv", ".avi", ".mov")
_PARTS_PREFIX = "20bn-something-something-v2"
_QUALCOMM = "https://apigwx-aws.qualcomm.com/qsc/public/v1/api/download/software/dataset/AIDataset/" \
            "Something-Something-V2/"
#: upstream's download locations (a login is needed; no public checksum record exists)
_FILES = {
    "video_part_00": DownloadInfo(_QUALCOMM + f"{_PARTS_PREFIX}-00", filename=f"{_PARTS_PREFIX}-00"),
    "video_part_01": DownloadInfo(_QUALCOMM + f"{_PARTS_PREFIX}-01", filename=f"{_PARTS_PREFIX}-01"),
    "labels": DownloadInfo("https://softwarecenter.qualcomm.com/api/download/software/dataset/AIDataset/"
                           "Something-Something-V2/20bn-something-something-download-package-labels.zip",
                           filename="20bn-something-something-download-package-labels.zip"),
}
#: the names each label file goes by (the package's and the short ones)
_LABEL_FILES = {
    "labels": ("labels.json", "something-something-v2-labels.json"),
    "train": ("train.json", "something-something-v2-train.json"),
    "validation": ("validation.json", "val.json", "something-something-v2-validation.json"),
    "test": ("test.json", "something-something-v2-test.json"),
    "test_answers": ("test-answers.csv", "test_answers.csv"),
}


def normalize_template(value: str | None) -> str:
    """A class template without its placeholder brackets ("Putting [something] on a surface" -> "Putting something
    on a surface"): labels.json spells them without, the annotations with."""
    return "" if value is None else str(value).replace("[", "").replace("]", "").strip()


class SomethingSomethingV2(CatalogBuilder):
    """Something-Something V2: `train`, `validation`, `test` (test labels from test-answers.csv when present)."""

    VERSION = Version("2.0.0")
    TASK = "action recognition"
    MANUAL_DOWNLOAD = ("Download Something-Something v2 from https://developer.qualcomm.com/software/ai-datasets/"
                       "something-something (sign in and accept the license): the video parts "
                       "20bn-something-something-v2-00 and -01 and 20bn-something-something-download-package-"
                       "labels.zip, into one folder (or the videos, extracted, in a videos/ subfolder and the label "
                       "files in labels/).")
    SOURCE = DatasetSource(
        homepage="https://developer.qualcomm.com/software/ai-datasets/something-something",
        assets=_FILES,
        citation="""@inproceedings{goyal2017something,
  title={The "Something Something" Video Database for Learning and Evaluating Visual Common Sense},
  author={Goyal, Raghav and Ebrahimi Kahou, Samira and Michalski, Vincent and Materzynska, Joanna and Westphal,
          Susanne and Kim, Heuna and Haenel, Valentin and Fruend, Ingo and Yianilos, Peter and Mueller-Freitag,
          Moritz and others},
  booktitle={Proceedings of the IEEE International Conference on Computer Vision},
  pages={5842--5850},
  year={2017}}""",
        license="Qualcomm data license agreement for research use",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Something-Something V2: crowd-sourced videos of humans performing fine-grained actions "
                        "with everyday objects; `label` indexes the 174 templates of labels.json (-1 when unknown), "
                        "`text` is the caption with the objects filled in.",
            features=Features({"video": Video(storage="path"), "video_id": Value("string"),
                               "video_filename": Value("string"), "label": Value("int32"), "text": Value("string"),
                               "template": Value("string"), "placeholders_json": Value("string"),
                               "split": Value("string")}),
            supervised_keys=("video", "label"),
            num_examples={"train": 168_913, "validation": 24_777, "test": 27_157},
        )

    def _split_generators(self, dl_manager):
        folder = self.manual_folder()
        return [SplitGenerator(name, {"folder": folder, "split": name})
                for name in (Split.TRAIN, Split.VALIDATION, Split.TEST)]

    def _generate_examples(self, folder, split):
        """Annotations in the split file's order; a video missing from the download is skipped with a warning,
        as upstream does (the row count check then names the shortfall)."""
        labels = _LabelFiles(folder)
        label_map = {normalize_template(name): int(index) for name, index in labels.json("labels", {}).items()}
        annotations = labels.json(split)
        if not isinstance(annotations, list):
            raise StableDatasetsError(f"{labels.where}: the {split} annotations are not a JSON list")
        answers = labels.test_answers() if split == Split.TEST else {}
        missing = []
        with _videos(folder) as find:
            for annotation in annotations:
                video_id = str(annotation["id"])
                video = find(video_id)
                if video is None:
                    missing.append(video_id)
                    continue
                filename, content = video
                template = normalize_template(annotation.get("template")) or normalize_template(answers.get(video_id))
                yield video_id, {
                    "video": content, "video_id": video_id, "video_filename": filename,
                    "label": int(label_map.get(template, -1)) if template else -1,
                    "text": str(annotation.get("label") or template), "template": template,
                    "placeholders_json": json.dumps(annotation.get("placeholders") or []), "split": str(split)}
        if missing:
            logger.warning("something_something_v2 {}: skipped {} of {} annotations whose video is missing "
                           "(first: {})", split, len(missing), len(annotations), missing[:5])


class _LabelFiles:
    """The label files, from `labels/` (searched recursively) or a `*labels*.zip` in the folder, read in place."""

    def __init__(self, folder: str):
        root = Path(folder)
        zips = sorted(root.glob("*labels*.zip"))
        self.folder = root / "labels" if (root / "labels").is_dir() else None
        self.zip = None if self.folder is not None or not zips else zips[0]
        if self.folder is None and self.zip is None:
            raise ManualDownloadError(f"something_something_v2: {folder} has no labels/ folder and no *labels*.zip. "
                                      f"{SomethingSomethingV2.MANUAL_DOWNLOAD}")
        self.where = str(self.folder or self.zip)

    def read(self, kind: str) -> bytes | None:
        """The bytes of the first file found under one of the names of `kind`, or None."""
        for name in _LABEL_FILES[kind]:
            if self.folder is not None:
                found = sorted(self.folder.rglob(name))
                if found:
                    return found[0].read_bytes()
            else:
                with zipfile.ZipFile(self.zip) as archive:  # type: ignore[arg-type]
                    found = sorted(n for n in archive.namelist() if posixpath.basename(n) == name)
                    if found:
                        return archive.read(found[0])
        return None

    def json(self, kind: str, default: object = None) -> object:
        data = self.read(kind)
        if data is None:
            if default is None:
                raise StableDatasetsError(f"{self.where} has none of {list(_LABEL_FILES[kind])}")
            return default
        try:
            return json.loads(data)
        except ValueError as exc:
            raise StableDatasetsError(f"{self.where}: {kind} file is not JSON ({exc})") from None

    def test_answers(self) -> dict[str, str]:
        """test-answers.csv: "<id>;<template>" a line (a comma also separates)."""
        data = self.read("test_answers")
        if data is None:
            return {}
        text = data.decode("utf-8")
        delimiter = ";" if ";" in text.split("\n", 1)[0] else ","
        return {row[0]: row[1] for row in csv.reader(io.StringIO(text), delimiter=delimiter) if len(row) >= 2}


@contextlib.contextmanager
def _videos(folder: str) -> Iterator[Callable[[str], tuple[str, str | bytes] | None]]:
    """A lookup: video id -> (file name, path or bytes), from a videos/ folder, the archive parts, or loose files."""
    root = Path(folder)
    parts = sorted(p for p in root.iterdir() if p.is_file() and p.name.startswith(_PARTS_PREFIX))
    if (root / "videos").is_dir() or not parts:
        files = _video_files(root / "videos" if (root / "videos").is_dir() else root)
        if not files:
            raise ManualDownloadError(f"something_something_v2: {folder} holds no videos (no videos/ folder, no "
                                      f"{_PARTS_PREFIX}-?? parts, no video files). "
                                      f"{SomethingSomethingV2.MANUAL_DOWNLOAD}")
        yield lambda video_id: (files[video_id].name, str(files[video_id])) if video_id in files else None
        return
    with open_parts(parts) as fh:
        if zipfile.is_zipfile(fh):
            with zipfile.ZipFile(fh) as archive:
                members = {_stem(info.filename): info.filename for info in archive.infolist()
                           if info.filename.lower().endswith(VIDEO_SUFFIXES)}
                yield lambda video_id: (posixpath.basename(members[video_id]), archive.read(members[video_id])) \
                    if video_id in members else None
            return
        fh.seek(0)
        yield _tar_lookup(fh, [str(p) for p in parts])


def _tar_lookup(fh: io.BufferedReader, parts: list[str]) -> Callable[[str], tuple[str, bytes] | None]:
    """Members of an uncompressed tar indexed in one pass over its headers, then read by seeking."""
    try:
        archive = tarfile.open(fileobj=fh, mode="r:")  # noqa: SIM115 (closed by the `with` below)
    except tarfile.TarError:
        raise StableDatasetsError(f"{parts[0]}...: the parts make neither a zip nor an uncompressed tar; extract them "
                                  f"into a videos/ folder beside them (cat {_PARTS_PREFIX}-?? | tar zx -C videos)") \
            from None
    index = {}
    with archive:  # closing the TarFile leaves `fh` open: it is read below
        while (member := archive.next()) is not None:
            archive.members.clear()  # keep no TarInfo per member: the index is all that is needed
            if member.isfile() and member.name.lower().endswith(VIDEO_SUFFIXES):
                index[_stem(member.name)] = (posixpath.basename(member.name), member.offset_data, member.size)

    def read(video_id: str) -> tuple[str, bytes] | None:
        if video_id not in index:
            return None
        name, offset, size = index[video_id]
        fh.seek(offset)
        return name, fh.read(size)

    return read


def _video_files(root: Path) -> dict[str, Path]:
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.lower().endswith(VIDEO_SUFFIXES):
                files[os.path.splitext(name)[0]] = Path(dirpath) / name
    return files


def _stem(member: str) -> str:
    return posixpath.splitext(posixpath.basename(member))[0]


#: upstream's short name
SSv2 = SomethingSomethingV2
