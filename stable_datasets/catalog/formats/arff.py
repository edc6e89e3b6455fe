"""ARFF files (Weka's attribute-relation format, as the UEA/UCR time-series archive ships them), read as a stream:
the header's attributes, then the data lines a block at a time, so a file of several gigabytes (MosquitoSound)
never sits whole in memory (scipy.io.arff.loadarff reads it whole). Dense data only; numeric attributes become
float32 (a missing `?` is NaN) and the class attribute, the last one, stays a string."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import numpy as np

from stable_datasets.errors import StableDatasetsError

_ATTRIBUTE = re.compile(r"@attribute\s+('(?:[^']|\\')*'|\"[^\"]*\"|\S+)\s+(.*)$", re.IGNORECASE)
_NUMERIC = ("numeric", "real", "integer")


@dataclass(frozen=True)
class ArffHeader:
    """The attributes of an ARFF file: names in order, and the declared values of the last (class) attribute when it
    is nominal (None when it is numeric or a string)."""

    names: list[str]
    class_values: list[str] | None


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _read_header(lines: Iterator[str], where: str) -> ArffHeader:
    names: list[str] = []
    kinds: list[str] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        lower = line.lower()
        if lower.startswith("@attribute"):
            match = _ATTRIBUTE.match(line)
            if match is None:
                raise StableDatasetsError(f"{where}: cannot read the attribute line {line[:80]!r}")
            names.append(_unquote(match.group(1)))
            kinds.append(match.group(2).strip())
        elif lower.startswith("@data"):
            break
    else:
        raise StableDatasetsError(f"{where}: no @data section")
    if len(names) < 2:
        raise StableDatasetsError(f"{where}: {len(names)} attribute(s); expected values and a class")
    not_numeric = [n for n, k in zip(names[:-1], kinds[:-1]) if k.lower() not in _NUMERIC]
    if not_numeric:
        raise StableDatasetsError(f"{where}: attributes {not_numeric[:3]} are not numeric")
    last = kinds[-1]
    values = [_unquote(v) for v in last.strip()[1:-1].split(",")] if last.startswith("{") else None
    return ArffHeader(names, values)


def iter_arff(fh: IO[bytes] | IO[str], *, where: str = "ARFF file",
              block_rows: int = 256) -> tuple[ArffHeader, Iterator[tuple[np.ndarray, list[str]]]]:
    """The header, and blocks of (values float32 `[rows, attributes - 1]`, class strings) in file order. `fh` is a
    binary or text file object (a zip member, say); `where` names it in errors."""
    text = io.TextIOWrapper(fh, encoding="utf-8") if not isinstance(fh, io.TextIOBase) else fh
    lines = iter(text)
    header = _read_header(lines, where)
    width = len(header.names) - 1

    def blocks() -> Iterator[tuple[np.ndarray, list[str]]]:
        rows: list[str] = []
        labels: list[str] = []
        for number, raw in enumerate(lines, start=1):
            line = raw.strip()
            if not line or line.startswith("%"):
                continue
            if line.startswith("{"):
                raise StableDatasetsError(f"{where}: sparse ARFF data is not supported (data line {number})")
            values, _, label = line.rpartition(",")
            rows.append(values)
            labels.append(_unquote(label))
            if len(rows) == block_rows:
                yield _parse(rows, width, where), labels
                rows, labels = [], []
        if rows:
            yield _parse(rows, width, where), labels

    return header, blocks()


def _parse(rows: list[str], width: int, where: str) -> np.ndarray:
    joined = ",".join(rows).replace("?", "nan")
    values = np.array(joined.split(","), dtype=np.float64) if joined else np.empty(0)
    if values.size != len(rows) * width:
        bad = next((r for r in rows if r.count(",") + 1 != width), rows[0])
        raise StableDatasetsError(f"{where}: a data line has {bad.count(',') + 1} values before its class, "
                                  f"expected {width}")
    return values.reshape(len(rows), width).astype(np.float32)


__all__ = ["ArffHeader", "iter_arff"]
