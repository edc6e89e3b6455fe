"""`load_dataset("json", data_files=...)`: JSON Lines, or one JSON document per file.

A file whose first character is `[` holds a top-level array of records (or of strings: a `text`
column); `field="data"` reads the records (a list of objects, or an object of columns) under that
key of a top-level object, as Hugging Face does. A file in an encoding pyarrow does not parse
(UTF-16, Latin-1, ...) is decoded whole first. JSON Lines files are parsed by pyarrow in blocks
of whole lines (blank lines are skipped), and a large file is divided by byte ranges at line ends
for `num_proc`. A line that is not valid JSON is an error naming the file and the line.
"""

from __future__ import annotations

import codecs
import functools
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson

from stable_datasets.errors import StableDatasetsError
from stable_datasets.features.features import Features
from stable_datasets.features.value import Value
from stable_datasets.loaders.base import FileLoader, FileLoaderConfig, Piece
from stable_datasets.loaders.columns import (
    LONG_INTEGER,
    LoaderError,
    exact_integer_type,
    features_from_schema,
    is_columnar,
)
from stable_datasets.loaders.compressed import compression_suffix
from stable_datasets.loaders.json_depth import check_depth
from stable_datasets.loaders.lines import (
    LineBytes,
    file_line_bytes,
    line_blocks,
    line_bytes,
    line_ranges,
    marks_byte_order,
)
from stable_datasets.urls import is_url

#: pyarrow parses blocks of this size on its threads (one block would use one core)
PARSE_BLOCK_BYTES = 1 << 20
#: bytes of the first file read to infer the features of JSON Lines
SAMPLE_BYTES = 1 << 20


@dataclass
class JsonConfig(FileLoaderConfig):
    field: str | None = None
    encoding: str = "utf-8"


class JsonLoader(FileLoader):
    config: JsonConfig
    name = "json"
    BUILDER_CONFIG_CLASS = JsonConfig
    EXTENSIONS = (".json", ".jsonl", ".ndjson")

    def infer_features(self) -> Features:
        path = self.first_file()
        if self._is_document(path):
            table = next(iter(self._document_tables(path)))
        elif self._transcoded():
            lines = file_line_bytes(path, self.config.encoding)
            sample, _ = next(line_blocks(path, None, None, SAMPLE_BYTES, lines=lines), (b"", 0))
            table, _ = self._parse_block(path, self._utf8(path, sample, 0, lines), 0, None)
        else:
            with open(path, "rb") as fh:
                sample = fh.read(SAMPLE_BYTES)
                sample += fh.readline()
            table, _ = self._parse_block(path, sample, 0, None)
            return features_from_schema(_exact_integer_schema(path, sample, table.schema, self.config.encoding),
                                         path)
        return features_from_schema(table.schema, path)

    def sample_file(self, path: str) -> str:
        """JSON Lines in a remote file: a copy of its first SAMPLE_BYTES (to a line end), all inference reads."""
        if is_url(path) and not compression_suffix(path) and not self._transcoded() and not self._is_document(path):
            return self.remote_start(path, SAMPLE_BYTES)
        return self.local_file(path)

    def _is_document(self, path: str) -> bool:
        if self.config.field is not None:
            return True
        head = self.remote_head(path, 4096)
        text = codecs.getincrementaldecoder(self.config.encoding)("replace").decode(head)
        return text.lstrip("\ufeff \t\r\n").startswith("[")

    def _transcoded(self) -> bool:
        """True for an encoding pyarrow cannot parse as it is (UTF-16, UTF-32, Latin-1...): such a file
        is decoded a block of whole lines at a time (loaders.lines) and parsed as UTF-8."""
        return codecs.lookup(self.config.encoding).name not in ("utf-8", "utf-8-sig", "ascii")

    def _utf8(self, path: str, block: bytes, first_line: int, lines: LineBytes) -> bytes:
        """A block of whole lines of a file in another encoding, as UTF-8; an undecodable one names its line."""
        try:
            return block.decode(lines.codec).encode("utf-8")
        except UnicodeDecodeError as exc:
            line = first_line + lines.count(block[:exc.start - exc.start % lines.width]) + 1
            raise LoaderError(f"{path}, line {line}: not valid {self.config.encoding} text ({exc.reason}); pass "
                              "encoding= naming the file's encoding") from None

    # -- pieces ----------------------------------------------------------------------------
    REMOTE_RANGES = "bytes"

    def piece_ranges(self, path: str, parts: int) -> list[Piece]:
        """Ranges of JSON Lines at line ends, whole code units in UTF-16/32 (a remote file whose first bytes name
        its byte order stays whole: a range's copy would not hold them)."""
        if self._is_document(path):
            return [[path, None, None]]
        if self.travels(path):
            if marks_byte_order(self.config.encoding):
                return [[path, None, None]]
            return line_ranges(path, parts, *self.remote_bytes(path), lines=line_bytes(self.config.encoding))
        return line_ranges(path, parts, lines=file_line_bytes(path, self.config.encoding))

    def read_piece(self, piece: Piece, conform: bool = True) -> Iterator[pa.Table]:
        path, start, stop = piece[:3]
        if start is None and self._is_document(path):  # a range is of JSON Lines (piece_ranges)
            row = 0
            for table in self._document_tables(path):
                absent = [n for n in self.features if n not in table.column_names]
                for name in absent:  # a field no record has is a null column, as in JSON Lines (and HF)
                    table = table.append_column(name, pa.nulls(table.num_rows))
                yield self.conform(table, path, row) if conform else table
                row += table.num_rows
            return
        schema = self._explicit_schema()
        casts = schema is not None
        row = 0
        lines = file_line_bytes(path, self.config.encoding)
        for block, line in line_blocks(path, start, stop, lines=lines):
            if self._transcoded():
                block = self._utf8(path, block, line, lines)
            # a column the parser refused in one block is inferred in the next ones too: each block is then parsed
            # once, not once more per refused column (a file of 0.0s for an int column parsed every block twice)
            table, schema = self._parse_block(path, block, line, schema, casts)
            line_of = functools.partial(_line_of_record, block, line)
            yield self.conform(table, f"{path} (from line {line + 1})", 0, line_of, path) if conform else table
            row += table.num_rows

    def _explicit_schema(self) -> pa.Schema | None:
        """The features' types where pyarrow can parse straight into them (class names stay text)."""
        fields = [pa.field(n, f.arrow_type()) for n, f in self.features.items()
                  if is_columnar(f) and type(f).__name__ != "ClassLabel"]
        return pa.schema(fields) if fields else None

    def _parse_block(self, path: str, block: bytes, first_line: int, schema: pa.Schema | None,
                     casts: bool = False) -> tuple[pa.Table, pa.Schema | None]:
        """(the block parsed, the explicit schema that parsed it), `casts` when `features=` are cast to.

        The block is parsed straight into the features' types (`schema`), the fast way. Where the parser
        refuses a value the cast accepts (0.0 or true for an int column, a number for a string one, as
        Hugging Face casts them), the block is parsed again with that column's type inferred, for
        `conform` to cast; a string column whose values are of several kinds (1, "x", true) or objects
        holds their JSON text, as in Hugging Face (`_loosen`)."""
        # a field beyond the features is refused by the parser (faster than inferring it, and the
        # cast to the features would refuse it anyway) unless class-name columns are left to inference
        complete = schema is not None and len(schema) == len(self.features)
        fields = list(self.features) if schema is not None or casts else None
        check_depth(path, block, first_line)  # before pyarrow, whose parser overflows the stack on deep values
        data, texts = block, set()
        while True:
            options = pajson.ParseOptions(explicit_schema=schema,
                                          unexpected_field_behavior="error" if complete else "infer")
            try:
                return _read_json(data, options), schema
            except pa.ArrowInvalid as exc:
                looser = self._loosen(schema, texts, exc) if fields is not None else None
                if looser is not None:
                    schema, texts = looser
                    complete = False
                    data = _with_texts(block, first_line, texts) if texts else block
                    if data is not None:
                        continue
                encoding = "utf-8" if self._transcoded() else self.config.encoding  # the block is UTF-8 by now
                error = line_error(path, block, first_line, encoding, exc, fields)
                if fields is not None and " (lines " in str(error):  # no line found: a kind no cast joins?
                    error = self._kind_error(path, block, first_line, exc) or error
                raise error from None

    def _document_column(self, name: Any, values: Any) -> Any:
        """A column of a JSON document as Arrow infers it; values of several kinds (1, "x", true) for a column
        that `features=` gives a Value type are each taken as their text, for the cast (as in JSON Lines)."""
        given = self.config.features
        try:
            return pa.array(values) if isinstance(values, list) else values
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            if given is None or type(given.get(name)) is not Value:
                raise
            return pa.array([_text_of(v) for v in values], pa.string())

    def _loosen(self, schema: pa.Schema | None, texts: set[str],
                exc: pa.ArrowInvalid) -> tuple[pa.Schema | None, set[str]] | None:
        """(the explicit schema without the column the parser refused a value of, the columns to read as
        JSON text), or None when the error is no value of another kind in a column of the features."""
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        named = re.search(r"Column\(/([^/)]*)(/?)[^)]*\) changed from \w+ to (\w+)", message)
        name = named[1].replace("~1", "/").replace("~0", "~") if named else None
        as_text = name is not None and not named[2] and type(self.features.get(name)) is Value
        names = schema.names if schema is not None else []
        if name in names:
            kept = [f for f in schema if f.name != name]  # type: ignore[union-attr]
            if as_text and self.features[name] == Value("string") and named[3] in ("object", "array"):
                texts = texts | {name}  # an object or a list kept as its JSON text, as Hugging Face keeps it
            return (pa.schema(kept) if kept else None), texts
        converted = re.search(r"Failed to convert JSON to (\w+), couldn't parse:\s*(\S+)", message)
        if converted is not None and schema is not None and not re.fullmatch(r"-?\d+", converted[2]):
            # a number written with a point or an exponent (0.0, 1e3; an integer that does not fit its type is
            # an error as it is). The parser does not say which column: any of that type
            kept = [f for f in schema if not re.search(rf"\b{converted[1]}\b", str(f.type))]
            if len(kept) < len(schema):
                return (pa.schema(kept) if kept else None), texts
        if as_text and name not in texts:  # values of several kinds (1, "x", true): each as its text, then cast
            return schema, texts | {name}
        return None

    def _kind_error(self, path: str, block: bytes, first_line: int, exc: pa.ArrowInvalid) -> LoaderError | None:
        """For a column the parser found values of two kinds in (an object, then a string) that no cast joins:
        the error naming the line and the first value of the second kind (error paths only)."""
        named = re.search(r"Column\(/([^)]*)\) changed from \w+ to (\w+)", str(exc))
        values = _json_values(block, first_line, "utf-8") if named else None
        if not values:
            return None
        steps = [s.replace("~1", "/").replace("~0", "~") for s in named[1].split("/")]
        if steps[0] not in self.features:
            return None
        for line, record in values:
            found = next((v for v in _at_path(record, steps) if _json_kind(v) == named[2]), _ABSENT)
            if found is not _ABSENT:
                feature = self.features[steps[0]]
                stored = feature.dtype if type(feature) is Value else repr(feature)
                inside = f" (at {'/'.join(steps[1:])})" if len(steps) > 1 else ""
                return LoaderError(f"{path}, line {line}: column {steps[0]!r}: value {found!r:.80}{inside} cannot be "
                                   f"stored as {stored}; pass features= to store the column as another type")
        return None

    def _document_tables(self, path: str) -> Iterator[pa.Table]:
        with open(path, encoding=self.config.encoding) as fh:
            text = fh.read()
        check_depth(path, text.encode("utf-8", "surrogatepass"), lines=False)
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoaderError(f"{path}, line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg})") from None
        field = self.config.field
        if field is not None:
            if not isinstance(document, dict) or field not in document:
                keys = sorted(document)[:20] if isinstance(document, dict) else type(document).__name__
                raise LoaderError(f"{path}: no top-level field {field!r} (field=); the file has {keys}")
            document = document[field]
        try:
            if isinstance(document, dict):  # an object of columns
                yield pa.table({n: self._document_column(n, values) for n, values in document.items()})
            elif isinstance(document, list):
                if document and all(isinstance(r, str) for r in document):  # texts: a "text" column, as in HF
                    yield pa.table({"text": pa.array(document, pa.string())})
                    return
                bad = next((i for i, r in enumerate(document) if not isinstance(r, dict)), None)
                if bad is not None:
                    kind = type(document[bad]).__name__
                    raise LoaderError(f"{path}: record {bad} of the top-level array is a {kind}, not an object (an "
                                      "array holds objects, or only strings)")
                names = list(dict.fromkeys(name for record in document for name in record))  # every record's keys
                yield pa.table({n: self._document_column(n, [r.get(n) for r in document]) for n in names}) if names \
                    else pa.Table.from_pylist(document)
            else:
                raise LoaderError(f"{path}: the JSON document is a {type(document).__name__}; expected an array of "
                                  "objects (or field= naming one)")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise LoaderError(f"{path}: the records do not form columns of one type each ({exc})") from None


def _text_of(value: Any) -> Any:
    """A JSON value as a string column holds it: a string as it is, anything else as its JSON text."""
    return value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                                           separators=(",", ":"))


def _exact_integer_schema(path: str, sample: bytes, schema: pa.Schema, encoding: str) -> pa.Schema:
    """`schema` with uint64 for float64 fields that hold only integers, some past int64 (see
    `exact_integer_type`); the sample's lines are parsed in Python only when it has such a literal."""
    doubles = [f.name for f in schema if pa.types.is_floating(f.type)]
    if not doubles or not LONG_INTEGER.search(sample):
        return schema
    records = [(n, json.loads(line)) for n, line in enumerate(sample.decode(encoding).split("\n"), start=1)
               if line.strip()]
    for name in doubles:
        exact = exact_integer_type(name, ((n, r.get(name)) for n, r in records), lambda n: f"{path}, line {n}")
        if exact is not None:
            schema = schema.set(schema.get_field_index(name), pa.field(name, exact))
    return schema


def _with_texts(block: bytes, first_line: int, texts: set[str]) -> bytes | None:
    """The block's records with the values of the `texts` fields that are no strings written as their JSON text
    (1 -> "1", true -> "true", {"x": 1} -> '{"x":1}'), one record a line; None when the block is no sequence of
    JSON values. Python per record: only for a string column whose values are of several kinds."""
    values = _json_values(block, first_line, "utf-8")
    if values is None:
        return None
    lines = []
    for _, record in values:
        if isinstance(record, dict):
            for name in texts:
                if name in record:
                    record[name] = _text_of(record[name])
        lines.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(lines).encode("utf-8", "surrogatepass")


_ABSENT = object()


def _json_kind(value: Any) -> str:
    """The kind pyarrow's JSON parser names a value by ("number", "string", "object", ...)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), "null")


def _at_path(value: Any, steps: list[str]) -> Iterator[Any]:
    """The values at a parser's column path (`[a, "[]", b]`: field a, each item, field b) inside a record."""
    if not steps:
        yield value
    elif steps[0] == "[]":
        for item in value if isinstance(value, list) else []:
            yield from _at_path(item, steps[1:])
    elif isinstance(value, dict) and steps[0] in value:
        yield from _at_path(value[steps[0]], steps[1:])


def _line_of_record(block: bytes, first_line: int, row: int) -> int | None:
    """The line (1-based) where the `row`-th record (0-based) of a block of JSON Lines starts (error paths only)."""
    values = _json_values(block, first_line, "utf-8")
    return values[row][0] if values is not None and row < len(values) else None


def _read_json(block: bytes, options: pajson.ParseOptions) -> pa.Table:
    """`block` parsed in PARSE_BLOCK_BYTES blocks on pyarrow's threads; a record longer than that (a
    long document) makes pyarrow refuse the block ('straddling object'), so the blocks grow until
    the longest record fits, as Hugging Face grows them."""
    size = PARSE_BLOCK_BYTES
    while True:
        try:
            return pajson.read_json(io.BytesIO(block), read_options=pajson.ReadOptions(block_size=size),
                                    parse_options=options)
        except pa.ArrowInvalid as exc:
            if "straddling" not in str(exc) or size > len(block):
                raise
            size = min(size * 4, len(block) + 1)


_SPACE = re.compile(r"[ \t\r\n]*")


def _json_values(block: bytes, first_line: int, encoding: str) -> list[tuple[int, Any]] | None:
    """(line it starts on, value) of each JSON value of `block` read as a whole, for records that
    span lines; None when the block is no sequence of JSON values (error paths only)."""
    try:
        text = block.decode(encoding)
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    values: list[tuple[int, Any]] = []
    position, line = 0, first_line + 1
    while True:
        start = _SPACE.match(text, position).end()  # type: ignore[union-attr]
        if start == len(text):
            return values
        line += text.count("\n", position, start)
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            return None
        values.append((line, value))
        line += text.count("\n", start, end)
        position = end


#: a \\uD800-\\uDBFF escape not followed by a \\uDC00-\\uDFFF one, or a \\uDC00-\\uDFFF one not after such
_LONE_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})|"
                             rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})(?<!\\)(?:\\\\)*\\u[dD][c-fC-F][0-9a-fA-F]{2}")


class _DuplicateKey(StableDatasetsError, ValueError):
    """A JSON object names a key twice (caught below and reported with its file and line)."""


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return record


def line_error(path: str, block: bytes, first_line: int, encoding: str, exc: Exception,
               fields: list[str] | None = None) -> LoaderError:
    """The first line of the block that is not a JSON object, or pyarrow's message with the file."""
    values: list[tuple[int, Any]] = []
    for number, raw in enumerate(block.split(b"\n"), start=first_line + 1):
        text = raw.strip()
        if not text:
            continue
        if _LONE_SURROGATE.search(text):
            return LoaderError(f"{path}, line {number}: a string holds a lone UTF-16 surrogate escape "
                               f"({_LONE_SURROGATE.search(text)[0].decode()} without its pair), which is no text; "
                               "fix or remove that record")
        try:
            values.append((number, json.loads(text.decode(encoding), object_pairs_hook=_refuse_duplicates)))
        except _DuplicateKey as duplicate:
            return LoaderError(f"{path}, line {number}: field {duplicate.args[0]!r} appears twice in one record; "
                               "give each field of a record once")
        except UnicodeDecodeError as error:
            return LoaderError(f"{path}, line {number}: not valid {encoding} text ({error.reason})")
        except json.JSONDecodeError as error:
            whole = _json_values(block, first_line, encoding)  # records over several lines (pretty-printed)
            if whole is None:
                return LoaderError(f"{path}, line {number}: invalid JSON ({error.msg} at column {error.colno})")
            values = whole
            break
    for number, value in values:
        if not isinstance(value, dict):
            return LoaderError(f"{path}, line {number}: a JSON Lines record must be an object, got "
                               f"{type(value).__name__}")
        extra = [k for k in value if fields is not None and k not in fields]
        if extra:
            return LoaderError(f"{path}, line {number}: field {extra[0]!r} is not in the features {fields}; pass "
                               "features= naming every field")
    if not block.strip() and not first_line:
        return LoaderError(f"{path}: the file is empty (no JSON records)")
    message = str(exc).strip().splitlines()[0]
    unparsed = re.search(r"Failed to convert JSON to (\w+), couldn't parse:(.+)$", message)
    if unparsed is not None:
        dtype, literal = unparsed[1], unparsed[2]
        records = dict(values)  # by the line each starts on
        for number, raw in enumerate(block.split(b"\n"), start=first_line + 1):
            if re.search(rb"(?<![\w.+-])" + re.escape(literal.encode()) + rb"(?![\w.])", raw):
                record = records.get(number)
                name = next((k for k, v in record.items() if json.dumps(v) == literal), None) \
                    if isinstance(record, dict) else None
                column = f"column {name!r}: " if name is not None else ""
                return LoaderError(f"{path}, line {number}: {column}value {literal} cannot be stored as {dtype}; pass "
                                   "features= to store the column as another type")
    last = first_line + block.count(b"\n")
    return LoaderError(f"{path} (lines {first_line + 1}-{last}): {message}; if a column "
                       "changes type between records, pass features= to say how to store it")
