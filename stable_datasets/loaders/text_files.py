"""`load_dataset("text", data_files=...)`: one `text` column, as Hugging Face reads text files.

`sample_by="line"` (each line a row, empty lines kept; `keep_linebreaks=True` keeps the line
ends), `"paragraph"` (blocks separated by a blank line, empty ones dropped) or `"document"`
(a whole file a row). Lines end at "\n", "\r\n" or "\r" (universal newlines, as `open()` reads
them), not at the other breaks `str.splitlines` knows (form feed, U+2028), as in Hugging Face.
Line-based files are divided by byte ranges at line ends for `num_proc`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from stable_datasets.features.features import Features
from stable_datasets.features.value import Value
from stable_datasets.loaders.base import FileLoader, FileLoaderConfig, Piece
from stable_datasets.loaders.columns import LoaderError
from stable_datasets.loaders.lines import (
    LineBytes,
    file_line_bytes,
    line_blocks,
    line_bytes,
    line_ranges,
    marks_byte_order,
)

SAMPLE_BY = ("line", "paragraph", "document")


@dataclass
class TextConfig(FileLoaderConfig):
    sample_by: str = "line"
    keep_linebreaks: bool = False
    encoding: str = "utf-8"
    encoding_errors: str = "strict"


class TextLoader(FileLoader):
    config: TextConfig
    name = "text"
    BUILDER_CONFIG_CLASS = TextConfig
    EXTENSIONS = (".txt", ".text", ".md")
    INFERS_FROM_FIRST_FILE = False  # the features are always one text column: no file is read for them

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.config.sample_by not in SAMPLE_BY:
            raise ValueError(f"the 'text' loader takes sample_by in {SAMPLE_BY}, got {self.config.sample_by!r}")

    def infer_features(self) -> Features:
        return Features({"text": Value("string")})

    @property
    def REMOTE_RANGES(self) -> str:  # type: ignore[override]
        """Ranges of lines only (paragraphs may span a cut), and not in an encoding whose byte order a file's first
        bytes name ("utf-16", "utf-32"): a range's copy would not hold them."""
        return "bytes" if self.config.sample_by == "line" and not marks_byte_order(self.config.encoding) else ""

    def piece_ranges(self, path: str, parts: int) -> list[Piece]:
        if self.config.sample_by != "line":
            return [[path, None, None]]
        if self.travels(path):
            return line_ranges(path, parts, *self.remote_bytes(path)) if self.REMOTE_RANGES else [[path, None, None]]
        return line_ranges(path, parts, lines=file_line_bytes(path, self.config.encoding))

    def read_piece(self, piece: Piece, conform: bool = True) -> Iterator[pa.Table]:
        path, start, stop = piece[:3]
        schema = pa.schema([pa.field("text", pa.string())])
        if self.config.sample_by == "line":
            ends = file_line_bytes(path, self.config.encoding)
            for block, line in line_blocks(path, start, stop, lines=ends):
                text = self._decode(path, block, line, ends)
                yield self._table(split_lines(text, self.config.keep_linebreaks), schema, conform, path, line)
            return
        text = self._decode(path, _read(path), 0)
        if self.config.sample_by == "document":
            yield self._table([text], schema, conform, path, 0)
            return
        paragraphs = [p for p in text.split("\n\n") if p]
        yield self._table(paragraphs, schema, conform, path, 0)

    def _table(self, rows: list[str], schema: pa.Schema, conform: bool, path: str, line: int) -> pa.Table:
        table = pa.Table.from_arrays([pa.array(rows, pa.string())], schema=schema)
        return self.conform(table, f"{path} (from line {line + 1})", 0) if conform else table

    def _decode(self, path: str, block: bytes, first_line: int, lines: LineBytes | None = None) -> str:
        """Universal newlines, as `open(path)` reads them; a decoding error names the line. A block of whole lines
        (`lines` given) is decoded in the byte order the file's mark named; a whole file by the encoding itself."""
        try:
            text = block.decode(lines.codec if lines else self.config.encoding, self.config.encoding_errors)
        except UnicodeDecodeError as exc:
            counted = lines or line_bytes(self.config.encoding, block[:4])
            line = first_line + counted.count(block[:exc.start - exc.start % counted.width]) + 1
            raise LoaderError(f"{path}, line {line}: not valid {self.config.encoding} text ({exc.reason}); pass "
                              "encoding= or encoding_errors='replace'") from None
        return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def split_lines(text: str, keepends: bool) -> list[str]:
    """Lines at "\n" only, as a file opened in text mode reads them (after universal newlines):
    `str.splitlines` would also cut at form feeds, "\x1c"-"\x1e", NEL and U+2028/U+2029."""
    lines = io.StringIO(text, newline="\n").readlines()
    return lines if keepends else [line[:-1] if line.endswith("\n") else line for line in lines]


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
