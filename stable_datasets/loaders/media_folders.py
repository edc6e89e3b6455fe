"""`load_dataset("imagefolder" | "videofolder", data_dir=... or data_files=...)`.

As Hugging Face does it: with a `metadata.csv` or `metadata.jsonl` among the files, each of
its records is a row, and its `file_name` column (a path relative to the metadata file's
folder, never absolute or outside it) becomes the `image` (`video`) column; without one, each
file is a row, labelled by its folder name (a `ClassLabel`, names sorted) when the files sit
at one depth in more than one folder (`drop_labels=False` forces labels, True drops them).

Each file is read and checked by the `Image()` / `Video()` feature as it is encoded, so an
unreadable file fails the build with an error naming it (and its row key, the file's path).
`file_name_column="file_name"` keeps each row's source file name in a column (off by default).
"""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
from loguru import logger

from stable_datasets.builder.info import SplitGenerator
from stable_datasets.features.base import FeatureType
from stable_datasets.features.features import Features
from stable_datasets.features.image import Image
from stable_datasets.features.value import ClassLabel, Value
from stable_datasets.features.video import Video
from stable_datasets.identity.inputs import files_identity
from stable_datasets.loaders.base import FileLoader, FileLoaderConfig, Piece
from stable_datasets.loaders.columns import LoaderError, features_from_schema
from stable_datasets.loaders.csv_input import csv_input
from stable_datasets.loaders.folders import IMAGE_EXTENSIONS, METADATA_FILES, VIDEO_EXTENSIONS
from stable_datasets.loaders.json_depth import check_depth
from stable_datasets.loaders.json_files import line_error


@dataclass
class MediaFolderConfig(FileLoaderConfig):
    drop_labels: bool | None = None
    drop_metadata: bool | None = None
    #: opt-in: a string column of this name holds each row's source file (relative to `data_dir`, or to
    #: its metadata file's folder; as given in `data_files` otherwise), e.g. `file_name_column="file_name"`
    file_name_column: str | None = None

    def fingerprint_identity(self) -> dict[str, Any]:
        """Every field, less `file_name_column` while it is unset: caches built before the option existed
        keep their fingerprint (a set column is a new cache, as any config change)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.file_name_column is None:
            del fields["file_name_column"]
        return fields


class MediaFolderLoader(FileLoader):
    """Files of one kind (images, videos), with labels from folders or a metadata file."""

    config: MediaFolderConfig
    BUILDER_CONFIG_CLASS = MediaFolderConfig
    read_tables = False
    INFERS_FROM_FIRST_FILE = False  # labels and metadata files come from the whole folder
    #: the column holding each file
    BASE_COLUMN: ClassVar[str] = ""

    def base_feature(self) -> FeatureType:
        raise NotImplementedError

    def companion_files(self) -> tuple[str, ...]:
        return METADATA_FILES

    def media_files(self) -> dict[str, list[str]]:
        extensions = tuple(e.lower() for e in self.EXTENSIONS)
        return {split: [p for p in paths if p.lower().endswith(extensions)]
                for split, paths in self.data_files().items()}

    def metadata_files(self) -> dict[str, list[str]]:
        if self.config.drop_metadata:
            return {}
        found = {split: [p for p in paths if os.path.basename(p) in METADATA_FILES]
                 for split, paths in self.data_files().items()}
        return {split: paths for split, paths in found.items() if paths}

    def input_files_identity(self) -> dict[str, Any] | None:
        """The data files, and the media files the metadata files name that `data_files` does not list
        (data_files='metadata.jsonl' reads the images it names): an edited image then rebuilds too."""
        identity = super().input_files_identity()
        metadata = self.metadata_files()
        if identity is None or not metadata or not self.config.data_files:
            return identity
        listed = {os.path.normpath(p) for paths in self.data_files().values() for p in paths}
        named = {file for paths in metadata.values() for path in paths for file in self._named_files(path)}
        unlisted = sorted(p for p in named - listed if os.path.isfile(p))  # a missing one fails the build, named
        if unlisted:
            identity["named_by_metadata"] = files_identity(unlisted, mode=identity["mode"], cache_root=self.cache_root)
        return identity

    def labels(self) -> list[str] | None:
        """Sorted folder names when the files get labels, else None."""
        if self.config.drop_labels or (self.metadata_files() and self.config.drop_labels is None):
            return None
        folders = {os.path.basename(os.path.dirname(p)) for paths in self.media_files().values() for p in paths}
        depths = {p.replace("\\", "/").count("/") for paths in self.media_files().values() for p in paths}
        if self.config.drop_labels is None and not (len(folders) > 1 and len(depths) == 1):
            if len(folders) > 1:
                logger.warning("the '{}' loader: files sit in {} folders at different depths, so they get no label "
                               "column; pass drop_labels=False to label each by its folder name",
                               self.builder_name(), len(folders))
            return None
        return sorted(folders)

    def infer_features(self) -> Features:
        metadata = self.metadata_files()
        if metadata:
            first = next(iter(metadata.values()))[0]
            inferred = features_from_schema(self._metadata_table(first).schema, first)
            if "file_name" not in inferred:
                raise LoaderError(f"{first}: a metadata file needs a file_name column (it has {list(inferred)})")
            return self._with_file_names(Features({(self.BASE_COLUMN if name == "file_name" else name):
                                                   (self.base_feature() if name == "file_name" else feature)
                                                   for name, feature in inferred.items()}))
        labels = self.labels()
        features = Features({self.BASE_COLUMN: self.base_feature()})
        if labels is not None:
            features["label"] = ClassLabel(names=labels)
        return self._with_file_names(features)

    def _with_file_names(self, features: Features) -> Features:
        column = self.config.file_name_column
        if column is None:
            return features
        if column in features:
            raise LoaderError(f"{self.builder_name()}: file_name_column={column!r} names a column the data already "
                              f"has ({list(features)}); choose another name")
        return Features({**features, column: Value("string")})

    def _file_name(self, path: str, folder: str | None = None) -> dict[str, str]:
        """The opt-in source file column of a row: `path` relative to `folder` or data_dir, else as given."""
        column = self.config.file_name_column
        if column is None:
            return {}
        base = folder if folder is not None else self.config.data_dir
        if base is not None and not str(base).startswith(("s3://", "gs://")) and "://" not in path:
            return {column: os.path.relpath(path, base).replace("\\", "/")}
        return {column: path}

    # -- splits: the media files, or the metadata files when there are any -----------------------
    def _split_generators(self, dl_manager: Any) -> list[Any]:
        metadata = self.metadata_files()
        generators = []
        for split, paths in self.media_files().items():
            files = metadata.get(split) if metadata else paths
            if metadata and not files:
                raise LoaderError(f"split '{split}' has no metadata file ({'/'.join(METADATA_FILES)}) while other "
                                  f"splits have one")
            if not files:
                raise FileNotFoundError(f"split '{split}' holds no {self.BASE_COLUMN} file "
                                        f"({'/'.join(self.EXTENSIONS)})")
            generators.append(SplitGenerator(split, {"pieces": [[p, None, None] for p in files]}))
        if metadata:
            self._warn_unlisted(metadata)
        return generators

    def _warn_unlisted(self, metadata: dict[str, list[str]]) -> None:
        from loguru import logger

        listed = {file for paths in metadata.values() for path in paths for file in self._named_files(path)}
        unlisted = [p for paths in self.media_files().values() for p in paths if os.path.normpath(p) not in listed]
        if unlisted:
            logger.warning("{}: {} {} file(s) have no record in the metadata files and are not loaded, e.g. {}",
                           self.builder_name(), len(unlisted), self.BASE_COLUMN, unlisted[0])

    def _named_files(self, path: str) -> list[str]:
        """The files a metadata file names (normalized paths; the build checks each name)."""
        folder = os.path.dirname(path)
        table = self._metadata_table(path)
        if "file_name" not in table.column_names:
            return []  # infer_features names the file
        names = table.column("file_name").to_pylist()
        return [os.path.normpath(os.path.join(folder, str(n))) for n in names if n is not None]

    def reusable_piece(self, piece: Piece) -> bool:
        """A metadata file's rows also hold the media files it names, which its identity does not cover."""
        return os.path.basename(piece[0]) not in METADATA_FILES

    def examples_of_piece(self, piece: Piece) -> Iterator[tuple[Any, dict[str, Any]]]:
        """Pieces are media files (a row each) or metadata files (a row per record)."""
        path = piece[0]
        if os.path.basename(path) in METADATA_FILES:
            yield from self._metadata_examples(path)
            return
        example: dict[str, Any] = {self.BASE_COLUMN: path}
        if isinstance(self.features.get("label"), ClassLabel):
            example["label"] = os.path.basename(os.path.dirname(path))
        yield path, example | self._file_name(path)

    def _metadata_examples(self, path: str) -> Iterator[tuple[Any, dict[str, Any]]]:
        folder = os.path.dirname(path)
        for number, record in enumerate(self._metadata_table(path).to_pylist()):
            name = record.pop("file_name", None)
            if not isinstance(name, str) or not name:
                raise LoaderError(f"{path}, record {number + 1}: file_name is {name!r}, not a relative path")
            relative = os.path.normpath(name).replace("\\", "/")
            if "://" in name or os.path.isabs(name) or relative == ".." or relative.startswith("../"):
                raise LoaderError(f"{path}, record {number + 1}: file_name {name!r} must be a relative path inside "
                                  f"{folder or '.'}")
            file = os.path.join(folder, relative)
            yield file, {self.BASE_COLUMN: file, **record, **self._file_name(file, folder)}

    def _metadata_table(self, path: str) -> pa.Table:
        with open(path, "rb") as fh:
            data = fh.read()
        if path.endswith(".jsonl"):
            check_depth(path, data)
            try:
                return pajson.read_json(io.BytesIO(data))
            except pa.ArrowInvalid as exc:
                raise line_error(path, data, 0, "utf-8", exc) from None
        try:
            return pacsv.read_csv(csv_input(data), parse_options=pacsv.ParseOptions(newlines_in_values=True),
                                  convert_options=pacsv.ConvertOptions(strings_can_be_null=True))
        except pa.ArrowInvalid as exc:
            raise LoaderError(f"{path}: not a readable CSV file ({str(exc).splitlines()[0]})") from None


class ImageFolderLoader(MediaFolderLoader):
    name = "imagefolder"
    EXTENSIONS = IMAGE_EXTENSIONS
    BASE_COLUMN = "image"

    def base_feature(self) -> FeatureType:
        return Image()


class VideoFolderLoader(MediaFolderLoader):
    name = "videofolder"
    EXTENSIONS = VIDEO_EXTENSIONS
    BASE_COLUMN = "video"

    def base_feature(self) -> FeatureType:
        return Video()
