"""`load_dataset("csv", data_files=...)`: CSV/TSV files read by pyarrow's streaming CSV reader.

Options are named as Hugging Face (pandas) names them: `sep` (or `delimiter`), `header`
("infer" or 0: the first row names the columns; None: no header row), `column_names` (or
`names`), `skiprows`, `quotechar`, `escapechar`, `encoding`, `na_values`, `keep_default_na`.
Empty fields and pandas' default NA markers ("", "NA", "N/A", "NaN", "null", "None", ...) are
nulls, as in pandas; `na_values` adds markers to those unless `keep_default_na=False`.
A row with another number of fields than the header is an error naming the file and line.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import functools
import io
import itertools
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from stable_datasets.features.features import Features
from stable_datasets.loaders.base import FileLoader, FileLoaderConfig, Piece
from stable_datasets.loaders.columns import (
    LONG_INTEGER,
    LoaderError,
    exact_integer_type,
    features_from_schema,
    is_columnar,
)
from stable_datasets.loaders.csv_input import CsvInput, csv_input, is_utf8
from stable_datasets.loaders.lines import line_ranges

BLOCK_BYTES = 16 << 20
#: pyarrow parses a range or a whole file in blocks of this size on its threads
PARSE_BLOCK_BYTES = 1 << 20
#: files up to this size whose records may span lines are parsed in one multi-threaded read
WHOLE_FILE_BYTES = 256 << 20
#: a file of single-line records is parsed this many bytes at a time (each on every core)
RANGE_BYTES = 16 << 20
#: bytes of the first file read to infer the features
SAMPLE_BYTES = 1 << 20
#: the text pandas (so Hugging Face) reads as a null by default (pandas' STR_NA_VALUES)
PANDAS_NA_VALUES = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
                    "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


@dataclass
class CsvConfig(FileLoaderConfig):
    sep: str = ","
    delimiter: str | None = None
    header: Any = "infer"
    column_names: list[str] | None = None
    names: list[str] | None = None
    skiprows: int = 0
    quotechar: str = '"'
    escapechar: str | None = None
    encoding: str = "utf-8"
    na_values: list[str] | str | None = None
    keep_default_na: bool = True


class CsvLoader(FileLoader):
    config: CsvConfig
    name = "csv"
    BUILDER_CONFIG_CLASS = CsvConfig
    EXTENSIONS = (".csv", ".tsv")

    # -- pyarrow options ------------------------------------------------------------------
    @property
    def delimiter(self) -> str:
        value = self.config.delimiter or self.config.sep
        if len(value) != 1:
            raise ValueError(f"the 'csv' loader reads one-character delimiters, got sep={value!r}")
        return value

    def _read_options(self) -> pacsv.ReadOptions:
        config = self.config
        names = config.column_names or config.names
        if config.header not in ("infer", 0, None):
            raise ValueError(f"the 'csv' loader takes header='infer', 0 or None, got {config.header!r}")
        skip_after = 1 if names and config.header == 0 else 0  # a header row replaced by column_names
        return pacsv.ReadOptions(use_threads=True, block_size=PARSE_BLOCK_BYTES, skip_rows=config.skiprows,
                                 skip_rows_after_names=skip_after, column_names=names,
                                 autogenerate_column_names=config.header is None and not names,
                                 encoding="utf8")  # other encodings are transcoded by csv_input

    def _parse_options(self, newlines_in_values: bool = True) -> pacsv.ParseOptions:
        # A malformed row stops the read and is then located by a re-read with Python's csv module
        # (pyarrow reports no line numbers). Quoted fields may hold line breaks, as pandas reads them.
        return pacsv.ParseOptions(delimiter=self.delimiter, quote_char=self.config.quotechar or False,
                                  escape_char=self.config.escapechar or False, newlines_in_values=newlines_in_values)

    def _convert_options(self, features: Features | None) -> pacsv.ConvertOptions:
        kwargs: dict[str, Any] = {"strings_can_be_null": True, "quoted_strings_can_be_null": True,
                                  "null_values": self._null_values()}
        if features is not None:
            # read each column straight as its type where Arrow can (class names stay text until mapped)
            kwargs["column_types"] = {name: f.arrow_type() for name, f in features.items()
                                      if is_columnar(f) and type(f).__name__ != "ClassLabel"}
        return pacsv.ConvertOptions(**kwargs)

    def _null_values(self) -> list[str]:
        """As pandas reads `na_values`: added to its default markers unless `keep_default_na=False`."""
        given = self.config.na_values
        if isinstance(given, dict):
            raise ValueError("the 'csv' loader takes na_values as a string or a list of strings (the same for every "
                             f"column), got a dict: {given!r}")
        given = [given] if isinstance(given, str) else [str(v) for v in given or []]
        return list(dict.fromkeys((PANDAS_NA_VALUES if self.config.keep_default_na else []) + given))

    def _column_names(self, names: list[str]) -> list[str]:
        if self.config.header is None and not (self.config.column_names or self.config.names):
            return [str(i) for i in range(len(names))]  # pandas numbers the columns
        return names

    # -- reading --------------------------------------------------------------------------
    def infer_features(self) -> Features:
        """Types pyarrow infers from the first SAMPLE_BYTES of the first file (pandas infers per
        chunk; later rows that do not fit are an error naming them, and features= settles it)."""
        path = self.first_file()
        options = self._read_options()
        options.block_size = SAMPLE_BYTES
        try:
            reader = _growing(lambda read: pacsv.open_csv(self._input(path), read_options=read,
                                                          parse_options=self._parse_options(),
                                                          convert_options=self._convert_options(None)), options)
            schema = reader.schema
        except (pa.ArrowInvalid, UnicodeError) as exc:
            raise self._error(path, exc) from None
        names = self._column_names(schema.names)
        _check_header(path, names)
        text = [f.name for f, n in zip(schema, names) if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
        if text:  # pyarrow falls back to bytes for text that is not UTF-8: a wrong encoding, never bytes wanted
            raise LoaderError(f"{path}, {_first_undecodable_line(path, self.config.encoding)}; pass encoding= "
                              "naming the file's encoding (e.g. 'latin-1')")
        types = self._exact_integer_types(path, schema, names)
        return features_from_schema(pa.schema([pa.field(n, types.get(n, f.type)) for n, f in zip(names, schema)]), path)

    def _exact_integer_types(self, path: str, schema: pa.Schema, names: list[str]) -> dict[str, pa.DataType]:
        """uint64 for sampled float64 columns that hold only integers, some past int64 (see
        `exact_integer_type`); the sample is read again as text only when it has such a literal."""
        doubles = [i for i, f in enumerate(schema) if pa.types.is_floating(f.type)]
        if not doubles:
            return {}
        with open(path, "rb") as fh:
            if not LONG_INTEGER.search(fh.read(SAMPLE_BYTES)):
                return {}
        options = self._read_options()
        options.block_size = SAMPLE_BYTES
        convert = self._convert_options(None)
        convert.column_types = {schema.names[i]: pa.string() for i in doubles}
        sample = _growing(lambda read: pacsv.open_csv(self._input(path), read_options=read,
                                                      parse_options=self._parse_options(), convert_options=convert),
                          options).read_next_batch()
        types = {}
        for i in doubles:
            text = sample.column(i)
            if not pc.all(pc.match_substring_regex(text, r"^[+-]?\d+$")).as_py():
                continue
            long = pc.indices_nonzero(pc.greater_equal(pc.utf8_length(text), 19)).to_numpy()
            negative = pc.indices_nonzero(pc.starts_with(text, "-")).to_numpy()[:1]
            values = [(r, -1) for r in negative] + [(r, int(text[r].as_py())) for r in long]

            def locate(row: int, i: int = i, text: pa.Array = text) -> str:
                line = self._line_of_value(path, i, text[row].as_py())
                return f"{path}, line {line}" if line is not None else f"{path}, row {row + 1}"

            exact = exact_integer_type(names[i], values, locate)
            if exact is not None:
                types[names[i]] = exact
        return types

    def read_piece(self, piece: Piece, conform: bool = True) -> Iterator[pa.Table]:
        """A file is parsed a RANGE_BYTES range of whole lines at a time, each range on every core (the
        writer writes one range while the next is parsed, see read_ahead.py); a file that cannot be
        cut at line ends (escape character, another encoding) is parsed at once up to WHOLE_FILE_BYTES,
        and streamed past that."""
        path, start, stop = piece
        convert = self._convert_options(self.features)
        try:
            tables: Iterator[pa.Table]
            size = os.path.getsize(path) if start is None else 0
            if size > RANGE_BYTES and self._cuttable():
                tables = self._read_ranges(path, self._line_cuts(path, -(-size // RANGE_BYTES)), convert)
            elif start is None and size > WHOLE_FILE_BYTES:
                read = self._read_options()
                read.block_size = BLOCK_BYTES
                tables = self._batches(lambda: self._input(path), read, convert)
            else:
                tables = iter([self._read_bytes(path, start, stop, convert)])
            row = 0
            where = path if not start else f"{path} (from byte {start})"
            line_of = functools.partial(self._line_of_row, path, start or 0)
            for table in tables:
                table = table.rename_columns(self._column_names(table.column_names))
                if row == 0:
                    _check_header(path, table.column_names)
                yield self.conform(table, where, row, line_of, path) if conform else table
                row += table.num_rows
        except (pa.ArrowInvalid, UnicodeError) as exc:
            raise self._error(path, exc) from None

    def _input(self, source: str | bytes | pa.Buffer) -> CsvInput:
        """What pyarrow reads of a file or of its bytes: UTF-8, no block ending inside a "\\r\\n" (csv_input)."""
        return csv_input(source, self.config.encoding)

    def _cuttable(self) -> bool:
        """Every line break outside quotes ends a record: no escape character, UTF-8 text."""
        return self.config.escapechar is None and is_utf8(self.config.encoding)

    def _read_ranges(self, path: str, cuts: list[int], convert: pacsv.ConvertOptions) -> Iterator[pa.Table]:
        """The tables of the ranges between `cuts` (line ends), a range read and checked just before
        it is parsed: a cut inside a quoted field (an odd number of quotes in the range) joins the
        range to the next one, so a record is never split, and no pass over the whole file comes first."""
        names: list[str] | None = None  # the header's, for the ranges after the first
        careful = False
        with open(path, "rb") as fh:
            for lo, data in _whole_record_ranges(fh, cuts, self.config.quotechar, WHOLE_FILE_BYTES):
                read = self._read_options() if lo == cuts[0] else pacsv.ReadOptions(
                    use_threads=True, block_size=PARSE_BLOCK_BYTES, column_names=names)
                if data is None:
                    yield from self._stream(path, lo, read, convert)
                    return
                table, careful = self._parse(data, read, convert, careful)
                names = names or table.column_names
                yield table

    def _stream(self, path: str, start: int, read: pacsv.ReadOptions,
                convert: pacsv.ConvertOptions) -> Iterator[pa.Table]:
        """The file from byte `start` on, streamed in BLOCK_BYTES blocks whose cuts follow quotes."""
        read.block_size = BLOCK_BYTES
        yield from self._batches(lambda: csv_input(path, "utf8", start), read, convert)

    def _batches(self, source: Callable[[], CsvInput], read: pacsv.ReadOptions,
                 convert: pacsv.ConvertOptions) -> Iterator[pa.Table]:
        """Tables of pyarrow's streaming reader over `source()`; when an integer column meets a number
        written another way ("0.0", see `_as_text`), the stream starts again past the rows it gave, with
        that column read as text (for `conform` to cast)."""
        done = 0
        while True:
            again = copy.copy(read)
            again.skip_rows_after_names = read.skip_rows_after_names + done
            try:
                for batch in pacsv.open_csv(source(), again, self._parse_options(True), convert):
                    done += batch.num_rows
                    yield pa.Table.from_batches([batch])
                return
            except pa.ArrowInvalid as exc:
                if not self._as_text(exc, convert, read.column_names or None, source):
                    raise

    def _parse(self, data: bytes | pa.Buffer, read: pacsv.ReadOptions, convert: pacsv.ConvertOptions,
               careful: bool = False) -> tuple[pa.Table, bool]:
        """`_parse_once`, again with a column read as text while an integer column meets a number written
        another way (`_as_text`; `convert` keeps the change, so the next ranges of the piece read it so)."""
        while True:
            try:
                return self._parse_once(data, read, convert, careful)
            except pa.ArrowInvalid as exc:
                if not self._as_text(exc, convert, read.column_names or None, lambda: self._input(data)):
                    raise

    def _as_text(self, exc: pa.ArrowInvalid, convert: pacsv.ConvertOptions, names: list[str] | None,
                 source: Callable[[], CsvInput]) -> bool:
        """Whether `exc` is pyarrow refusing a number ("0.0", "1e3", "1.5") for a column the features make
        an integer: then `convert` reads that column as text from now on, and `conform` casts it as pandas
        reads such text (loaders.columns.cast_file_column: 0, 1000, and an error naming the line of 1.5).
        pyarrow parses integers only as digits; reading every integer column as text would be slower."""
        found = _CONVERSION.match(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        if found is None:
            return False
        try:
            float(found[3])
        except ValueError:
            return False  # no number: `_error` names it
        if names is None:  # the header's names (the reader numbers the column in the file)
            options = self._read_options()
            options.block_size = 1 << 16
            names = _growing(lambda read: pacsv.open_csv(source(), read, self._parse_options(),
                                                         self._convert_options(None)), options).schema.names
        column = int(found[1])
        types = dict(convert.column_types)
        if column >= len(names) or not pa.types.is_integer(types.get(names[column], pa.null())):
            return False
        types[names[column]] = pa.string()
        convert.column_types = types
        return True

    def _parse_once(self, data: bytes | pa.Buffer, read: pacsv.ReadOptions, convert: pacsv.ConvertOptions,
                    careful: bool = False) -> tuple[pa.Table, bool]:
        """(the table, whether quotes had to be followed). pyarrow cuts `data` into blocks at any line
        break unless told that values may hold line breaks (which makes its cutting follow quotes, ~2x
        slower); a block cut inside quotes makes its parser fail ("out of sync with chunker"), never
        return other rows, so `data` is parsed the fast way first and again the careful way on failure.
        A real error fails both ways. `careful` skips the fast try (a previous range needed care)."""
        if not careful:
            try:
                return pacsv.read_csv(self._input(data), read, self._parse_options(False), convert), False
            except pa.ArrowInvalid:
                pass
        return _growing(lambda grown: pacsv.read_csv(self._input(data), grown, self._parse_options(True), convert),
                        read), True

    def _read_bytes(self, path: str, start: int | None, stop: int | None,
                    convert: pacsv.ConvertOptions) -> pa.Table:
        source = pa.memory_map(path)  # the buffer keeps the map open while the table is parsed
        if start is None:
            data = source.read_buffer()
        else:
            source.seek(start)
            data = source.read_buffer((stop or source.size()) - start)
        read = self._read_options()
        if start:  # a range after the header: the header's names, nothing to skip, records are lines
            read = pacsv.ReadOptions(use_threads=True, block_size=PARSE_BLOCK_BYTES,
                                     column_names=self._header_names(path))
        return self._parse(data, read, convert, careful=self.config.escapechar is not None)[0]

    def _header_names(self, path: str) -> list[str]:
        """The column names as the start of the file gives them (before pandas-style numbering)."""
        options = self._read_options()
        options.block_size = 1 << 16
        return _growing(lambda read: pacsv.open_csv(self._input(path), read, self._parse_options(),
                                                    self._convert_options(None)), options).schema.names

    def _line_cuts(self, path: str, parts: int) -> list[int]:
        """Byte offsets of about `parts` equal ranges, at line ends after the header (quotes unchecked)."""
        with open(path, "rb") as fh:
            for _ in range(self.config.skiprows + (0 if self.config.header is None else 1)):
                fh.readline()
            header_end = fh.tell()
        ranges = line_ranges(path, parts)
        return [0] + [r[1] for r in ranges[1:] if r[1] > header_end] + [ranges[-1][2]]

    def piece_ranges(self, path: str, parts: int) -> list[Piece]:
        """Byte ranges at line ends outside quotes (see `_read_ranges`), for parts in other processes;
        a file that cannot be cut (escape character, another encoding) stays whole."""
        if not self._cuttable():
            return [[path, None, None]]
        cuts = _cuts_outside_quotes(path, self._line_cuts(path, parts), self.config.quotechar)
        return [[path, lo, hi] for lo, hi in itertools.pairwise(cuts)]

    def _line_of_row(self, path: str, start: int, row: int) -> int | None:
        """The line (1-based, as an editor counts it) where the `row`-th record (0-based) read from byte
        `start` begins: the header and `skiprows` are counted, a quoted line break too (error paths only)."""
        config = self.config
        try:
            with open(path, "rb") as fh:
                before = 0
                while fh.tell() < start:  # the lines before a range (which starts at a record's start)
                    before += fh.read(min(start - fh.tell(), 16 << 20)).count(b"\n")
                names = config.column_names or config.names
                skip = 0 if start else config.skiprows + (1 if config.header == 0 or (
                    config.header == "infer" and not names) else 0)
                text = io.TextIOWrapper(fh, encoding=config.encoding, errors="strict", newline="")
                records = _records_of(text, self.delimiter, config.quotechar, config.escapechar, 0)
                for line, _ in itertools.islice(records, skip + row, None):
                    return before + line
        except (csv.Error, UnicodeError, OSError):
            pass
        return None

    def _line_of_value(self, path: str, column: int, value: str) -> int | None:
        try:
            records = _csv_records(path, self.delimiter, self.config.quotechar, self.config.escapechar,
                                   self.config.encoding, self.config.skiprows)
            for line, fields in records:
                if column < len(fields) and fields[column] == value:
                    return line
        except (csv.Error, UnicodeError):
            pass
        return None

    def _error(self, path: str, exc: Exception) -> LoaderError:
        """The first malformed row named by its line, from pyarrow's report or a re-read with `csv`."""
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        conversion = _CONVERSION.match(message)
        if conversion is not None:
            column, dtype, value = int(conversion[1]), conversion[2], conversion[3]
            names = list(self.features)
            name = names[column] if column < len(names) else f"#{column}"
            line = self._line_of_value(path, column, value)
            at = f", line {line}" if line is not None else ""
            return LoaderError(f"{path}{at}: column {name!r}: value {value!r} cannot be stored as {dtype}; pass "
                               "features= to store the column as another type")
        found = _first_malformed_line(path, self.delimiter, self.config.quotechar, self.config.escapechar,
                                      self.config.encoding, self.config.skiprows)
        if found is not None:
            return LoaderError(f"{path}, {found}")
        if isinstance(exc, UnicodeError):
            return LoaderError(f"{path}: not valid {self.config.encoding} text ({getattr(exc, 'reason', exc)})")
        return LoaderError(f"{path}: {message}")


#: pyarrow's message for a field its column type cannot parse: (column number, type, the field)
_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error to (\w+): invalid value '(.*)'$")


def _growing(read_with: Any, options: pacsv.ReadOptions) -> Any:
    """`read_with(options)`, again with larger blocks while pyarrow refuses a record longer than its
    block ('straddling object': a field of several MiB), as Hugging Face grows its blocks."""
    while True:
        try:
            return read_with(options)
        except pa.ArrowInvalid as exc:
            if "straddling" not in str(exc) or options.block_size >= 1 << 30:
                raise
            options.block_size = options.block_size * 4


@contextlib.contextmanager
def _no_field_limit() -> Iterator[None]:
    """The `csv` module refuses fields over 128 KiB; the error paths read every field whole."""
    before = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(before)


def _check_header(path: str, names: list[str]) -> None:
    """Column names must be unique and non-empty: Arrow would fail later naming neither file nor line."""
    for number, name in enumerate(names, start=1):
        if not name:
            raise LoaderError(f"{path}, line 1: column {number} of the header has no name; name it, or pass "
                              "column_names=")
        if names.index(name) != number - 1:
            raise LoaderError(f"{path}, line 1: column name {name!r} appears more than once in the header; "
                              "rename one, or pass column_names=")


def _first_undecodable_line(path: str, encoding: str) -> str:
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as exc:
                return f"line {number}: not valid {encoding} text ({exc.reason} at byte {exc.start} of the line)"
    return f"not valid {encoding} text"


def _whole_record_ranges(fh: Any, cuts: list[int], quotechar: str | None,
                        most_bytes: int = WHOLE_FILE_BYTES) -> Iterator[tuple[int, bytes | None]]:
    """(start, bytes) of the ranges between consecutive `cuts` of the open file, a range joined to
    the next while it holds an odd number of quote characters (its end cut a quoted field in two).
    Each range starts at an even count, so its own count says where it ends (`bytes.count` runs at
    memory speed; a numpy pass over the whole file took ~50 ms of CPU per 35 MB). A range that
    would pass `most_bytes` ends the ranges with (start, None): the rest of the file, to stream."""
    quote = quotechar.encode() if quotechar else b""
    lo = cuts[0]
    for hi in cuts[1:]:
        if hi <= lo:
            continue
        parts = [os.pread(fh.fileno(), hi - lo, lo)]
        end, odd = hi, bool(quote) and parts[0].count(quote) % 2 == 1
        while odd and end < cuts[-1]:
            if end - lo > most_bytes:  # a quote that never closes (or a stray one): stream the rest
                yield lo, None
                return
            following = next(c for c in cuts if c > end)
            parts.append(os.pread(fh.fileno(), following - end, end))
            odd ^= parts[-1].count(quote) % 2 == 1
            end = following
        yield lo, parts[0] if len(parts) == 1 else b"".join(parts)
        lo = end


def _cuts_outside_quotes(path: str, cuts: list[int], quotechar: str | None,
                         chunk_bytes: int = 64 << 20) -> list[int]:
    """The `cuts` (line ends, the first and last kept) with an even number of quote characters
    before them, counted a chunk at a time: where a record ends."""
    if not quotechar:
        return cuts
    quote, kept, parity = quotechar.encode(), [cuts[0]], 0
    with open(path, "rb") as fh:
        for lo, hi in itertools.pairwise(cuts):
            for offset in range(lo, hi, chunk_bytes):
                parity ^= os.pread(fh.fileno(), min(chunk_bytes, hi - offset), offset).count(quote) & 1
            if not parity or hi == cuts[-1]:
                kept.append(hi)
    return kept


def _csv_records(path: str, delimiter: str, quotechar: str | None, escapechar: str | None, encoding: str,
                 skiprows: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-empty record, as Python's `csv` reads them (error paths only)."""
    with open(path, encoding=encoding, errors="strict", newline="") as fh:
        yield from _records_of(fh, delimiter, quotechar, escapechar, skiprows)


def _records_of(fh: Any, delimiter: str, quotechar: str | None, escapechar: str | None,
                skiprows: int) -> Iterator[tuple[int, list[str]]]:
    """(line number counted from the text's start, fields) of each non-empty record of an open text file."""
    with _no_field_limit():
        reader = csv.reader(fh, delimiter=delimiter, quotechar=quotechar or None, escapechar=escapechar, strict=True)
        for _ in range(skiprows):
            next(reader, None)
        start = reader.line_num + 1
        for fields in reader:
            if fields:
                yield start, fields
            start = reader.line_num + 1


def _first_malformed_line(path: str, delimiter: str, quotechar: str | None, escapechar: str | None, encoding: str,
                          skiprows: int) -> str | None:
    """Where the file first breaks the CSV grammar or the header's field count (error path only)."""
    with open(path, encoding=encoding, errors="strict", newline="") as fh, _no_field_limit():
        try:
            reader = csv.reader(fh, delimiter=delimiter, quotechar=quotechar or None, escapechar=escapechar,
                                strict=True)
            expected = None
            for _ in range(skiprows):
                next(reader, None)
            for fields in reader:
                if not fields:
                    continue
                if expected is None:
                    expected = len(fields)
                elif len(fields) != expected:
                    return f"line {reader.line_num}: expected {expected} fields, got {len(fields)}"
        except csv.Error as exc:
            return f"line {reader.line_num}: {exc}"
        except UnicodeError as exc:
            return f"not valid {encoding} text ({getattr(exc, 'reason', exc)}, in line {reader.line_num + 1})"
    return None


__all__ = ["CsvConfig", "CsvLoader"]
