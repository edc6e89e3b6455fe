"""`load_dataset("webdataset", data_files="shards/*.tar")`: tar shards (also .tar.gz/.tgz/.tar.bz2/.tar.xz,
told by their magic bytes), members grouped by key.

As in WebDataset, a member `dir/0001.jpg` has key `dir/0001` and extension `jpg`; consecutive
members with one key form a sample, a row with `__key__`, `__url__` (the shard) and a column
per extension. Cells are decoded by extension: images (jpg, png, webp, ...) are `Image()`
cells, `json` is parsed, `txt`/`text` is text, `cls`/`index`/`id` an integer, `npy` a numpy array
as nested lists (read without unpickling: an object array is an error), anything else bytes;
a `.gz` member (`0001.txt.gz`) is gunzipped first and read by the extension before `.gz`.
Features are inferred from the first samples of the first shard (or given with `features=`, and
then a column or json field a sample lacks is a null, as in Hugging Face); with inferred features
a sample missing a column, or a malformed tar, is an error naming the shard (and key or byte offset).

Tars are walked by the strict header parser of `stable_datasets.interleaved.tar_format`.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from stable_datasets.builder.info import SplitGenerator
from stable_datasets.download.manager import DownloadManager
from stable_datasets.features.base import FeatureType
from stable_datasets.features.features import Features
from stable_datasets.features.image import Image
from stable_datasets.features.value import Value
from stable_datasets.interleaved.keys import split_member
from stable_datasets.interleaved.tar_format import TAR_SUFFIXES, TarFormatError, iter_tar, map_file
from stable_datasets.loaders.base import FileLoader, Piece
from stable_datasets.loaders.columns import LoaderError, feature_for_type
from stable_datasets.loaders.folders import IMAGE_EXTENSIONS
from stable_datasets.loaders.json_depth import check_depth

IMAGE_KINDS = {e.lstrip(".") for e in IMAGE_EXTENSIONS} | {"ppm", "pgm", "pbm"}
TEXT_KINDS = {"txt", "text"}
INT_KINDS = {"cls", "cls2", "index", "inx", "id"}
#: samples of the first shard read to infer the features
SAMPLES_FOR_FEATURES = 16


def _kind(extension: str) -> str:
    """What a member holds, by its last extension (a gzipped member by the one before `.gz`)."""
    extension = extension.lower()
    return extension[:-3].rsplit(".", 1)[-1] if extension.endswith(".gz") else extension.rsplit(".", 1)[-1]


def decode_member(extension: str, data: bytes, where: str) -> Any:
    kind = _kind(extension)
    if extension.lower().endswith(".gz"):  # `0001.txt.gz`: gunzipped, then read as a txt member (as in HF)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise LoaderError(f"{where}: cannot gunzip the {extension!r} member ({exc})") from None
    try:
        if kind == "json":
            check_depth(where, data, lines=False)
            return json.loads(data)
        if kind in TEXT_KINDS:
            return data.decode("utf-8")
        if kind in INT_KINDS:
            return int(data.decode("ascii").strip())
        if kind == "npy":  # a numpy array as nested lists, as Hugging Face reads it (never unpickled)
            return np.load(io.BytesIO(data), allow_pickle=False).tolist()
    except (ValueError, UnicodeDecodeError, EOFError) as exc:
        raise LoaderError(f"{where}: cannot read the {extension!r} member as {kind} ({exc})") from None
    return data


def sample_member(name: str) -> tuple[str, str] | None:
    """(key, extension) of a tar member, split as WebDataset splits it; None for a hidden file (`.DS_Store`, macOS's
    `._name` copies, in any folder of the tar), which WebDataset and Hugging Face skip: it belongs to no sample."""
    if name.rpartition("/")[2].startswith("."):
        return None
    return split_member(name)


def count_samples(path: str) -> int:
    """Samples of a tar from its member headers only (runs of members with one key, as `iter_samples` groups them):
    no member is copied or decoded. A malformed tar is a LoaderError; a bad member is named when it is read."""
    mapped, view = map_file(path)
    try:
        samples, key = 0, None
        try:
            for member in iter_tar(path, view):
                split = sample_member(member.name)
                if split is not None:
                    samples += split[0] != key
                    key = split[0]
        except TarFormatError as exc:
            raise LoaderError(str(exc)) from None
        return samples
    finally:
        view.release()
        if mapped is not None:
            mapped.close()


def iter_samples(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, {extension: decoded value}) of each sample of a tar, in order (hidden files skipped: `sample_member`)."""
    mapped, view = map_file(path)
    try:
        key: str | None = None
        sample: dict[str, Any] = {}
        try:
            for member in iter_tar(path, view, on_link=functools.partial(_refuse_link, path)):
                split = sample_member(member.name)
                if split is None:
                    continue
                member_key, extension = split
                if member_key != key and sample:
                    yield key, sample  # type: ignore[misc]
                    sample = {}
                key = member_key
                where = f"{path}, member {member.name!r}"
                if not extension:
                    raise LoaderError(f"{where}: a WebDataset member needs an extension (key.extension)")
                if extension in sample:
                    raise LoaderError(f"{where}: the sample {key!r} has two {extension!r} members")
                data = bytes(view[member.offset_data:member.offset_data + member.size])
                sample[extension] = decode_member(extension, data, where)
        except TarFormatError as exc:
            raise LoaderError(str(exc)) from None
        if sample:
            yield key, sample  # type: ignore[misc]
    finally:
        try:
            view.release()
            if mapped is not None:
                mapped.close()
        except BufferError:  # a traceback still holds a slice: the collector unmaps it
            pass


def _refuse_link(path: str, name: str, target: str, offset: int) -> None:
    """A member that is a link would be dropped (it holds no bytes), and its sample would seem to lack a column."""
    raise LoaderError(f"{path}, member {name!r} (byte {offset}): a link to {target!r}, not a file; a WebDataset "
                      "shard must hold each member's bytes: write the tar without links (tar --dereference)")


class WebDatasetLoader(FileLoader):
    name = "webdataset"
    EXTENSIONS = TAR_SUFFIXES  # compressed shards are decompressed once into a temporary file
    read_tables = False

    def infer_features(self) -> Features:
        path = self.first_file()
        columns: dict[str, list[Any]] = {}
        for count, (_, sample) in enumerate(iter_samples(path)):
            for extension, value in sample.items():
                columns.setdefault(extension, []).append(value)
            if count + 1 >= SAMPLES_FOR_FEATURES:
                break
        if not columns:
            raise LoaderError(f"{path}: the tar holds no sample")
        features: dict[str, FeatureType] = {"__key__": Value("string"), "__url__": Value("string")}
        for extension, values in columns.items():
            features[extension] = _feature_of(extension, values, path)
        return Features(features)

    def _split_generators(self, dl_manager: DownloadManager) -> list[SplitGenerator]:
        generators = super()._split_generators(dl_manager)
        for generator, sources in zip(generators, self.data_files().values()):
            for piece, source in zip(generator.gen_kwargs["pieces"], sources):
                piece.append(source)  # __url__: the shard as the user named it, not this node's copy of a URL
        return generators

    def examples_of_piece(self, piece: Piece) -> Iterator[tuple[Any, dict[str, Any]]]:
        path = piece[0]
        url = piece[3] if len(piece) > 3 else path
        given = self.config.features is not None
        for key, sample in iter_samples(path):
            example = {"__key__": key, "__url__": url, **sample}
            # with features= given, a column or json field a sample lacks is a null, as in Hugging Face;
            # with inferred features, a sample lacking a column is an error naming it
            yield f"{url}:{key}", _with_nulls(example, self.features) if given else example


def _with_nulls(value: Any, feature: FeatureType) -> Any:
    """`value` with every field of the struct `feature` that it lacks set to None (nested structs too)."""
    if not isinstance(feature, Features) or not isinstance(value, dict):
        return value
    return {**value, **{name: _with_nulls(value.get(name), sub) for name, sub in feature.items()}}


def _feature_of(extension: str, values: list[Any], path: str) -> FeatureType:
    kind = _kind(extension)
    if kind in IMAGE_KINDS:
        return Image()
    if kind in TEXT_KINDS:
        return Value("string")
    if kind in INT_KINDS:
        return Value("int64")
    if kind in ("json", "npy"):
        try:
            return feature_for_type(pa.array(values).type)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise LoaderError(f"{path}: the {extension!r} members of the first samples differ in type ({exc}); pass "
                              "features=") from None
    return Value("binary")
