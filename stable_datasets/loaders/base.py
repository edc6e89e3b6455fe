"""`FileLoader`: the builder behind the generic loaders ("csv", "json", "parquet", ...).

A loader is a builder like any other: its files enter the fingerprint by identity (see
identity/inputs.py), its features are given (`features=`) or inferred from the first
file, and it writes through the one write path. A split's files become pieces (a whole file,
or a range of a large one: Parquet row groups, byte ranges of line-based files). A split of
many files is written in groups of whole files cut where each file's name and size say
(builder.file_groups), one part each, so that after an edit a rebuild reads only the groups
of the changed files and links the others from the previous cache (write.reuse); a few large
files are divided instead into `num_proc` jobs of about equal bytes.

A loader says how to read one piece (`read_piece`): Arrow tables for the tabular formats,
which go to the write path as record batches (`columnar`), or (key, example) pairs for
images, videos and tar samples, which go through the features' encoders row by row.

Files in an object store (`s3://`, `gs://`), and `http(s)://` files whose server gives validators
(ETag, Last-Modified: the fingerprint's HEAD records them), stay URLs in the jobs: each part copies
the files it reads into its own node's inputs folder (download.inputs) when it reads them, checking
that each is still the version the fingerprint identified, so parts that run on machines sharing no
disk find their inputs. The driver reads only what planning needs: sizes from the identity (no
download), and the first file when the features are inferred. A large one is divided like a local
one (`REMOTE_RANGES` loaders: line-based files at line ends found by small ranged reads around each
cut, Parquet by row groups from its footer), in ranges of at least MIN_RANGE_BYTES, and each part
fetches only its range (ranged GETs). An error in a range names the URL and the line counted from
the start of the file (the lines before the range are counted only then).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import pyarrow as pa

from stable_datasets.builder.builder import GeneratorBasedBuilder
from stable_datasets.builder.config import BuilderConfig
from stable_datasets.builder.data_files import normalize_data_files
from stable_datasets.builder.file_groups import file_size, incremental_groups
from stable_datasets.builder.info import DatasetInfo, SplitGenerator
from stable_datasets.builder.source_identity import builder_source_text
from stable_datasets.cache.paths import downloads_dir
from stable_datasets.download.inputs import (
    count_object_lines,
    fetch_object_range,
    is_object_url,
    object_range,
    open_object,
    options_for,
    remote_size,
)
from stable_datasets.download.manager import DownloadManager
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.base import as_feature
from stable_datasets.features.features import Features
from stable_datasets.features.hf import from_hf_features
from stable_datasets.loaders.columns import LoaderError, conform_table, is_columnar
from stable_datasets.loaders.compressed import COMPRESSIONS, compression_suffix, decompressed
from stable_datasets.loaders.folders import infer_data_files
from stable_datasets.loaders.lines import line_end
from stable_datasets.loaders.read_ahead import read_ahead
from stable_datasets.urls import is_url
from stable_datasets.write.engines import JobRunner
from stable_datasets.write.plan import SplitJobs

#: rows per record batch handed to the write path by the tabular loaders
BATCH_ROWS = 64 * 1024
#: a large data file (local or remote) is divided into ranges of at least this many bytes (as many as the parts,
#: at most): each range costs a part its fixed work (and, remote, a few requests), so no 1,000 tiny parts
MIN_RANGE_BYTES = 8 << 20


@dataclass
class FileLoaderConfig(BuilderConfig):
    """Options every loader takes; `features` (a Features or a dict of features) skips inference."""

    features: Any = None


# A piece is [path, start, stop]: the whole file when start and stop are None, else a range
# whose unit the loader chooses (row groups, bytes).
Piece = list[Any]


class FileLoader(GeneratorBasedBuilder):
    """Base class of the generic loaders; subclasses set `name`, `EXTENSIONS` and read pieces."""

    config: FileLoaderConfig
    BUILDER_CONFIG_CLASS: ClassVar[type[BuilderConfig]] = FileLoaderConfig
    #: file name endings this loader reads (lowercase, with the dot); used when listing a folder
    EXTENSIONS: ClassVar[tuple[str, ...]] = ()
    #: True for loaders whose pieces are Arrow tables (tabular formats), False for media and tars
    read_tables: ClassVar[bool] = True
    #: True when `infer_features` reads the first data file only (see `_inference_key`)
    INFERS_FROM_FIRST_FILE: ClassVar[bool] = True
    #: "bytes": pieces of a remote file are byte ranges its parts fetch alone (`local_piece`, line-based formats);
    #: "reader": the loader reads its ranges through `remote_reader` (Parquet's row groups); "": whole files
    REMOTE_RANGES: ClassVar[str] = ""

    def __init__(self, config_name: str | None = None, **kwargs: Any):
        super().__init__(config_name, **kwargs)
        config = self.config
        if config.features is not None and not isinstance(config.features, Features):
            config = self.config = cast(FileLoaderConfig, config.replace(features=_our_features(config.features)))
        if config.data_dir and config.data_files:  # data_files relative to data_dir, as in Hugging Face
            self.config = cast(FileLoaderConfig, config.replace(data_files=_under(config.data_dir, config.data_files),
                                                               data_dir=None))
        elif not config.data_files and not config.data_dir:
            raise ValueError(f"the '{self.builder_name()}' loader needs data_files= (a path, a glob, a list, or a "
                             "dict of split -> paths) or data_dir= (a folder)")
        self._files: dict[str, list[str]] | None = None
        self._inferred: tuple[Any, Features] | None = None  # (_inference_key(), features)
        self._identities: tuple[Any, dict[str, list[Any]]] | None = None  # (_inputs_read, its entries by path)

    # -- files -----------------------------------------------------------------------------
    def fingerprint_inputs(self, storage_format: str = "arrow",
                           layout_options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Files listed afresh, and features inferred from them, for each fingerprint; the build that
        follows reads the very list the fingerprint identified."""
        self._files = None
        self.object_versions = {}  # inference reads the first file before this fingerprint identifies it
        if self.config.features is None and (self._inferred is None or self._inferred[0] != self._inference_key()):
            self._info_cache = None
        return super().fingerprint_inputs(storage_format, layout_options)

    made_by_kind: ClassVar[str] = "loader"

    def resolved_data_files(self) -> dict[str, list[str]] | None:
        return self.data_files()

    def _resolved_data_files(self) -> dict[str, list[str]] | None:
        return self.data_files() if self.config.data_files else None  # one glob, not two

    def source_text(self) -> str:
        return _library_source_text(type(self))

    def data_files(self) -> dict[str, list[str]]:
        """split -> files, globs expanded; from a data_dir, the files this loader reads, split by name."""
        if self._files is None:
            if self.config.data_files:
                self._files = normalize_data_files(self.config.data_files, self.builder_name(),
                                                   input_options=self.input_storage_options)
            else:
                names = self.EXTENSIONS + self.companion_files()
                if self.read_tables:  # train.csv.gz too
                    names += tuple(n + suffix for n in self.EXTENSIONS for suffix in COMPRESSIONS)
                self._files = infer_data_files(self.config.data_dir or ".", names, self.builder_name())
        return self._files

    def companion_files(self) -> tuple[str, ...]:
        """Names of files read beside the data files (metadata.csv for image folders)."""
        return ()

    def local_file(self, path: str, dl_manager: DownloadManager | None = None) -> str:
        """A local path for a data file; a remote one is downloaded once into the downloads folder, and
        a compressed one (`.gz`, `.zst`, ...) is read from its decompressed copy there (tabular and text
        loaders)."""
        if path.startswith("file://"):
            path = path[len("file://"):]
        elif self.travels(path):  # this node's verified copy, of the version the fingerprint identified
            path = self.local_input(path)
        elif "://" in path:
            path = str((dl_manager or self._download_manager()).download(path))
        if self.read_tables and compression_suffix(path):
            return decompressed(path, downloads_dir(self.cache_root))
        return path

    def first_file(self) -> str:
        """The first data file that is not empty (features are inferred from it, as in Hugging Face an
        empty file among others is no reason to fail), else the first one."""
        first = None
        for paths in self.data_files().values():
            for path in paths:
                if not self.is_companion(path):
                    local = self.sample_file(path)
                    if file_size(local) > 0:
                        return local
                    first = first or local
        if first is not None:
            return first
        where = self.config.data_files or self.config.data_dir
        raise FileNotFoundError(f"the '{self.builder_name()}' loader found no data file in {where}")

    def sample_file(self, path: str) -> str:
        """A local file to infer the features from, for the data file `path`: the file itself (a remote one
        copied whole) unless a loader reads only the start of it (JSON Lines: a copy of its first MiB)."""
        return self.local_file(path)

    def remote_start(self, url: str, least: int) -> str:
        """A local copy of the first `least` bytes of a remote data file and the rest of the line they end in."""
        size, read_at = self.remote_bytes(url)
        if not size:  # a server that gives no size (nor, then, ranges we could trust): the whole file
            return self.local_file(url)
        stop = line_end(read_at, least, size) if size > least else size
        return str(fetch_object_range(url, 0, stop, options_for(url, self.input_storage_options),
                                      self.object_versions.get(url)))

    def is_companion(self, path: str) -> bool:
        return os.path.basename(path) in self.companion_files()

    # -- features --------------------------------------------------------------------------
    def _info(self) -> DatasetInfo:
        given = self.config.features
        if given is None:
            key = self._inference_key()
            if self._inferred is None or key is None or self._inferred[0] != key:
                self._inferred = (key, self.infer_features())
            given = self._inferred[1]
        return DatasetInfo(features=given, description=f"Files read by the '{self.builder_name()}' loader.")

    def _inference_key(self) -> tuple[Any, ...] | None:
        """What the inferred features depend on: the first file as it is now (its path, size and
        mtime), for loaders that infer from it alone; None (infer every time) for the others.
        Each fingerprint needs the features and one builder is often fingerprinted more than once
        (`is_prepared`, then `prepare`; a warm `load_dataset` again), so this saves a second read
        and parse of the sample."""
        if not self.INFERS_FROM_FIRST_FILE:
            return None
        path = self.first_file()
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return path, stat.st_size, stat.st_mtime_ns, stat.st_ino

    def infer_features(self) -> Features:
        raise NotImplementedError

    def columnar_examples(self) -> bool:
        return self.read_tables and is_columnar(self.features)

    # -- splits and jobs ---------------------------------------------------------------------
    def _split_generators(self, dl_manager: DownloadManager) -> list[SplitGenerator]:
        generators = []
        for split, paths in self.data_files().items():
            local = [p if self.travels(p) else self.local_file(p, dl_manager) for p in paths]  # URLs: by the parts
            generators.append(SplitGenerator(split, {"pieces": [[p, None, None] for p in local]}))
        return generators

    def piece_size(self, path: str) -> int:
        """A piece's file size, for dividing the work: a remote file's from its identity (no download)."""
        if self.travels(path):
            version = self.object_versions.get(path)
            return int(version[0]) if version and isinstance(version[0], int) else 0
        return file_size(path)

    def local_piece(self, piece: Piece) -> Piece:
        """`piece` with its file on this node's disk (an object-store file is copied here first; a byte range of
        one, only that range: [its copy, 0, its length])."""
        if not self.travels(piece[0]):
            return piece
        if piece[1] is not None and self.REMOTE_RANGES == "bytes":
            url, start, stop = piece[:3]
            copy = fetch_object_range(url, start, stop, options_for(url, self.input_storage_options),
                                      self.object_versions.get(url))
            return [str(copy), 0, stop - start, *piece[3:]]
        if piece[1] is not None and self.REMOTE_RANGES == "reader":
            return piece  # the loader reads its ranges through remote_reader
        return [self.local_file(piece[0]), *piece[1:]]

    def travels(self, path: str) -> bool:
        """Whether a data file stays a URL in the jobs, fetched by the part that reads it on its own node: an
        object-store file, or an http(s) one the fingerprint identified by its validators (`object_versions`)."""
        return is_object_url(path) or path in self.object_versions

    def remote_reader(self, url: str) -> Any:
        """A seekable binary file over a remote data file, each read a ranged GET of the version the
        fingerprint identified (download.inputs.open_object)."""
        return open_object(url, options_for(url, self.input_storage_options), self.object_versions.get(url))

    def remote_bytes(self, url: str) -> tuple[int, Callable[[int, int], bytes]]:
        """(size, read_at(offset, n)) of a remote data file: what planning its ranges reads of it (its size from the
        fingerprint's identity, else a HEAD)."""
        options, expected = options_for(url, self.input_storage_options), self.object_versions.get(url)
        size = int(expected[0]) if expected and isinstance(expected[0], int) else remote_size(url, options)
        return size, lambda offset, n: object_range(url, offset, min(offset + n, size), options, expected)

    def remote_head(self, path: str, n: int) -> bytes:
        """The first `n` bytes of a data file, local or remote (a ranged GET)."""
        if is_url(path):
            return self.remote_bytes(path)[1](0, n)
        with open(path, "rb") as fh:
            return fh.read(n)

    def _piece_tables(self, piece: Piece) -> Iterator[pa.Table]:
        """`read_piece` of a piece on this node, its errors naming the file as the user named it (see `_as_named`)."""
        local = self.local_piece(piece)
        try:
            yield from self.read_piece(local)
        except StableDatasetsError as exc:
            raise self._as_named(exc, piece, local) from None

    def _as_named(self, exc: StableDatasetsError, piece: Piece, local: Piece) -> StableDatasetsError:
        """An error about a local copy of an object-store file (or of a range of it) as one about the URL, its
        line numbers counted from the start of the file: for a range, the lines before it are counted now (a
        ranged read of them; only an error needs it)."""
        url, copy = piece[0], local[0]
        text = str(exc)
        if not self.travels(url) or copy == url or copy not in text:
            return exc
        offset = 0
        start = piece[1] if self.REMOTE_RANGES == "bytes" and piece[1] else 0
        if start and re.search(re.escape(copy) + r"(, line | \(from line )\d+", text):
            offset = count_object_lines(url, start, options_for(url, self.input_storage_options),
                                        self.object_versions.get(url))
        text = re.sub(re.escape(copy) + r"(, line | \(from line )(\d+)",
                      lambda m: f"{url}{m.group(1)}{int(m.group(2)) + offset}", text)
        text = text.replace(copy, url)
        try:
            return type(exc)(text)
        except TypeError:
            return LoaderError(text)

    def piece_ranges(self, path: str, parts: int) -> list[Piece]:
        """A file divided into up to `parts` pieces, in order (by default it is not divided)."""
        return [[path, None, None]]

    def _plan_split(self, generator: SplitGenerator, num_jobs: int, run: JobRunner, workdir: Path) -> SplitJobs:
        """Groups of whole files cut where the files themselves say (builder.file_groups), so a later build
        after an edit reuses every group it did not touch (write.reuse); pieces of equal bytes instead when
        there are fewer such groups than `num_jobs` (a few large files)."""
        pieces: list[Piece] = generator.gen_kwargs["pieces"]
        groups = incremental_groups([p[0] for p in pieces], num_jobs, self.PART_TARGET_BYTES)
        if groups:
            return SplitJobs([{"pieces": pieces[lo:hi]} for lo, hi in groups])
        if num_jobs <= 1 or not pieces:
            return SplitJobs([{"pieces": pieces}])
        sizes = [self.piece_size(p[0]) for p in pieces]
        total = sum(sizes) or 1
        divided: list[Piece] = []
        weights: list[float] = []
        for piece, size in zip(pieces, sizes):
            parts = max(1, round(num_jobs * size / total)) if len(pieces) < num_jobs else 1
            parts = min(parts, max(1, size // MIN_RANGE_BYTES))  # no part of a few bytes: its fixed costs dominate
            if self.travels(piece[0]) and (not self.REMOTE_RANGES or compression_suffix(piece[0])):
                parts = 1  # a compressed file is read whole (its decompressed copy is what ranges would cut)
            split = [[*r, *piece[3:]] for r in self.piece_ranges(piece[0], parts)] if parts > 1 else [piece]
            divided.extend(split)
            weights.extend([size / len(split)] * len(split))
        return SplitJobs([{"pieces": group} for group in _contiguous_groups(divided, weights, num_jobs)])

    INCREMENTAL_PARTS: ClassVar[bool] = True

    def _part_identity(self, job: Any) -> Any | None:
        """The identity of a job's files as the fingerprint took it (path, size, mtime or content hash), with each
        piece's range: a part of the same files under the same loader, config and features holds the same rows.
        None (always built) for a file the fingerprint did not identify as read (a download, a decompressed copy)
        or a piece that depends on other files (`reusable_piece`)."""
        pieces = job.get("pieces") if isinstance(job, dict) else None
        known = self._inputs_read
        if not pieces or known is None:
            return None
        if self._identities is None or self._identities[0] is not known:
            self._identities = (known, {e[0]: e for group in [*known.get("data_files", {}).values(),
                                                              known.get("data_dir", [])] for e in group})
        entries = self._identities[1]
        identity = []
        for piece in pieces:  # the fingerprint's entries are by resolved path: a realpath only where a link is
            entry = entries.get(os.path.abspath(piece[0])) or entries.get(os.path.realpath(piece[0]))
            if entry is None or not self.reusable_piece(piece):
                return None
            identity.append([entry, piece[1:]])
        return identity

    def reusable_piece(self, piece: Piece) -> bool:
        """Whether a piece's rows depend on its own file only (else its part is built every time)."""
        return True

    def _generate_examples(self, pieces: list[Piece]) -> Iterator[Any]:  # type: ignore[override]
        """Record batches of the pieces for columnar features, else (key, example) pairs."""
        if self.columnar_examples():
            for table in read_ahead(table for piece in pieces for table in self._piece_tables(piece)):
                yield from (batch for batch in table.to_batches(BATCH_ROWS) if batch.num_rows)
            return
        for piece in pieces:
            local = self.local_piece(piece)
            copy = f"{local[0]}:"
            named = f"{piece[0]}@{piece[1]}:" if piece[1] is not None else f"{piece[0]}:"
            try:
                for key, example in self.examples_of_piece(local):
                    # keys name the file as the user named it (not this node's copy) and, for a range, where it
                    # starts: rows are counted from the start of the piece, so two ranges of one file never share
                    # a key (they did: "a.jsonl:0" twice was a duplicate-key error)
                    yield (named + key[len(copy):] if isinstance(key, str) and key.startswith(copy) else key), \
                        example
            except StableDatasetsError as exc:
                raise self._as_named(exc, piece, local) from None

    def read_piece(self, piece: Piece, conform: bool = True) -> Iterator[pa.Table]:
        """Tables of one piece, conformed to the features unless `conform` is False (tabular loaders)."""
        raise NotImplementedError

    def examples_of_piece(self, piece: Piece) -> Iterator[tuple[Any, dict[str, Any]]]:
        """(key, example) pairs of one piece: row by row from its tables unless a loader has its own."""
        path = piece[0]
        row = 0
        for table in self.read_piece(piece, conform=False):
            for example in table.to_pylist():
                yield f"{path}:{row}", example
                row += 1

    def conform(self, table: pa.Table, where: str, first_row: int,
                line_of: Callable[[int], int | None] | None = None, path: str | None = None) -> pa.Table:
        """`table` cast to the features; a value that does not fit names `where`, its column and its row, or
        its line in `path` when `line_of` turns the row (from the piece's start) into one."""
        return conform_table(table, self.features, where, first_row, line_of, path)


@functools.cache
def _library_source_text(cls: type) -> str:
    """A packaged loader's code, read once per process (the installed library does not change under it)."""
    return builder_source_text(cls)


def _our_features(given: Any) -> Features:
    """`features=` as ours: a Features, a dict of our features, or Hugging Face's `datasets.Features`."""
    if type(given).__module__.startswith("datasets"):
        return from_hf_features(given)
    features = as_feature(given)
    if not isinstance(features, Features):
        raise ValueError(f"features= must be a Features or a dict of features, got {given!r}")
    return features


def _under(folder: str, data_files: Any) -> Any:
    def join(item: Any) -> str:
        text = os.fspath(item)
        return text if "://" in text or os.path.isabs(text) else os.path.join(folder, text)

    if isinstance(data_files, dict):
        return {split: _under(folder, files) for split, files in data_files.items()}
    if isinstance(data_files, (str, os.PathLike)):
        return join(data_files)
    return [join(f) for f in data_files]


def _contiguous_groups(items: list[Any], weights: list[float], groups: int) -> list[list[Any]]:
    """`items` cut in order into at most `groups` runs of about equal total weight."""
    groups = max(1, min(groups, len(items)))
    total = sum(weights) or float(len(items))
    if not sum(weights):
        weights = [1.0] * len(items)
    out: list[list[Any]] = [[]]
    done = 0.0
    for item, weight in zip(items, weights):
        boundary = total * len(out) / groups
        if out[-1] and len(out) < groups and done + weight / 2 > boundary:
            out.append([])
        out[-1].append(item)
        done += weight
    return out
