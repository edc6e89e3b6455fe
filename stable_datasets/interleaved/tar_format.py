"""Tar members, read and written fast and strictly (ustar, PAX and GNU long names).

Python's `tarfile` spends most of a shard read parsing headers one object at a time. This
walks the 512-byte headers of a memory-mapped tar directly: it checks each header's checksum,
applies PAX `path`/`size` records and GNU long names, and yields every regular file with its
data offset and size, so member bytes are one slice of the map. Anything malformed (a bad
checksum, a header or data cut short, bytes after the end that are not zero) raises
`TarFormatError` with the byte offset.

`TarWriter` writes regular files with ustar headers (a PAX record carries names over 100
bytes) and the two zero blocks that end an archive; `tarfile` reads what it writes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from stable_datasets.errors import StableDatasetsError


class TarFormatError(StableDatasetsError, ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class TarMember:
    name: str
    offset_data: int
    size: int


def _text(field: bytes, path: object, offset: int) -> str:
    raw = field.split(b"\0", 1)[0]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TarFormatError(f"{path}: member name {raw!r} in the tar header at byte {offset} is not UTF-8",
                             offset) from None


def _number(field: bytes, path: object, offset: int) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256 for large values; 0xff starts a negative one
        value = int.from_bytes(field[1:], "big")
        return -1 if field[0] == 0xFF else value
    digits = field.split(b"\0", 1)[0].strip()
    if digits and not all(48 <= c <= 55 for c in digits):  # int() would also take a sign, '_' or spaces
        raise TarFormatError(f"{path}: bad number {field!r} in the tar header at byte {offset}", offset)
    return int(digits or b"0", 8)


def _pax_records(data: bytes, path: object, offset: int) -> dict[str, str]:
    """Records `"<length> key=value\n"`; each one must advance and end inside `data`."""
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        if not data[pos:].strip(b"\0"):  # zero padding after the last record
            break
        where = offset + pos
        space = data.find(b" ", pos, pos + 21)
        digits = data[pos:space] if space > pos else b""
        length = int(digits) if digits.isdigit() else 0
        end = pos + length
        if length <= len(digits) + 1 or end > len(data) or data[end - 1:end] != b"\n":
            raise TarFormatError(f"{path}: malformed PAX header record at byte {where}", where)
        key, equals, value = data[space + 1:end - 1].partition(b"=")
        try:
            if not equals or not key:
                raise UnicodeDecodeError("utf-8", key, 0, 0, "no key=value")
            records[key.decode("utf-8")] = value.decode("utf-8")
        except UnicodeDecodeError:
            raise TarFormatError(f"{path}: malformed PAX header record at byte {where} (not UTF-8 key=value)",
                                 where) from None
        pos = end
    return records


def _pax_size(value: str, path: object, offset: int) -> int:
    if not (value.isascii() and value.isdigit()):
        raise TarFormatError(f"{path}: PAX size {value!r} at byte {offset} is not a non-negative integer", offset)
    return int(value)


def iter_tar(path: str | os.PathLike, view: memoryview,
             on_link: Callable[[str, str, int], None] | None = None) -> Iterator[TarMember]:
    """Regular-file members of the tar held in `view`, in order. A link member (hard or symbolic) holds no
    bytes: `on_link(name, target, byte offset)` is told of each, to refuse it; else it is skipped.

    Every step moves forward by at least one 512-byte header, and every size is checked
    against the bytes left, so a hostile tar ends in a `TarFormatError`, never a loop.
    """
    total = len(view)
    pos = 0
    pending_name: str | None = None
    pending_size: int | None = None
    while True:
        if pos + 512 > total:
            raise TarFormatError(f"{path}: truncated or corrupt tar at byte {pos}", pos)
        header = bytes(view[pos:pos + 512])
        if header == bytes(512):
            tail = view[pos:]
            if len(tail) < 1024 or any(tail):
                raise TarFormatError(f"{path}: truncated or corrupt tar at byte {pos}", pos)
            return
        stored = _number(header[148:156], path, pos)
        if stored != sum(header[:148]) + 256 + sum(header[156:]):
            raise TarFormatError(f"{path}: truncated or corrupt tar at byte {pos} (bad header checksum)", pos)
        name = _text(header[0:100], path, pos)
        if header[257:262] == b"ustar" and header[345:500].strip(b"\0"):
            name = f"{_text(header[345:500], path, pos)}/{name}"
        size = _number(header[124:136], path, pos)
        kind = header[156:157]
        data = pos + 512
        if kind in (b"x", b"g", b"L"):
            _check_size(path, name, data, size, total)
            end = data + size
            if kind == b"x":
                records = _pax_records(bytes(view[data:end]), path, data)
                pending_name = records.get("path", pending_name)
                if "size" in records:
                    pending_size = _pax_size(records["size"], path, data)
            elif kind == b"L":
                pending_name = _text(bytes(view[data:end]), path, data)
            pos = data + -(-size // 512) * 512
            continue
        if pending_name is not None:
            name, pending_name = pending_name, None
        if pending_size is not None:
            size, pending_size = pending_size, None
        if kind in (b"0", b"\0", b"7") or size:  # other kinds (links, folders) may still carry data to skip
            _check_size(path, name, data, size, total)
        if kind in (b"0", b"\0", b"7"):
            yield TarMember(name, data, size)
        elif kind in (b"1", b"2") and on_link is not None:
            on_link(name, _text(header[157:257], path, pos), pos)
        pos = data + -(-size // 512) * 512


def _check_size(path: object, name: str, data: int, size: int, total: int) -> None:
    if size < 0:
        raise TarFormatError(f"{path}: member {name!r} at byte {data} has a negative size ({size})", data)
    if data + size > total:
        raise TarFormatError(f"{path}: truncated tar, member {name!r} at byte {data} needs {size} bytes, "
                             f"{total - data} are left", data)


# Compressed tars (`.tar.gz`, `.tar.bz2`, `.tar.xz`) are told by their magic bytes, not their names.
_COMPRESSIONS: tuple[tuple[bytes, str], ...] = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "lzma"))
_CHUNK = 1 << 20
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")


def compression_of(head: bytes) -> str | None:
    """The module that decompresses a file starting with `head`, or None for a plain file."""
    return next((module for magic, module in _COMPRESSIONS if head.startswith(magic)), None)


def _decompressed(fh: BinaryIO, module: str | None, path: object) -> BinaryIO:
    """The stream (decompressed by `module`, if any) copied into an unlinked temporary file (in
    $TMPDIR), so it can be mapped like a local tar; a damaged stream is a `TarFormatError` at the
    decompressed byte reached."""
    import bz2
    import gzip
    import lzma
    import tempfile
    import zlib

    openers = {"gzip": lambda f: gzip.GzipFile(fileobj=f), "bz2": bz2.BZ2File, "lzma": lzma.LZMAFile}
    out = tempfile.TemporaryFile(prefix="stable-datasets-tar-")  # noqa: SIM115 - returned open
    written = 0
    try:
        with contextlib.nullcontext(fh) if module is None else openers[module](fh) as stream:
            while chunk := stream.read(_CHUNK):
                out.write(chunk)
                written += len(chunk)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        out.close()
        raise TarFormatError(f"{path}: damaged {module} stream after {written} decompressed bytes ({exc})",
                             written) from None
    out.flush()
    return out


def map_file(path: str | os.PathLike) -> tuple[mmap.mmap | None, memoryview]:
    """A read-only map of the tar (None and an empty view for an empty file). A compressed tar is
    decompressed first into a temporary file that lives as long as the map."""
    with open(path, "rb") as fh:
        return map_stream(fh, path)


def map_stream(fh: BinaryIO, path: object) -> tuple[mmap.mmap | None, memoryview]:
    """`map_file` for an open binary file: a local one is mapped in place; a compressed one, or one
    with no file descriptor (a remote file), is copied (decompressed) into a temporary file first."""
    head = fh.read(6)
    fh.seek(0)
    module = compression_of(head)
    try:
        fh.fileno()
        local = True
    except (AttributeError, OSError, ValueError):
        local = False
    source = _decompressed(fh, module, path) if module or not local else fh
    try:
        if os.fstat(source.fileno()).st_size == 0:
            return None, memoryview(b"")
        mapped = mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ)
    finally:
        if source is not fh:
            source.close()  # the map keeps the unlinked file's pages
    return mapped, memoryview(mapped)


def _octal(value: int, width: int) -> bytes:
    return f"{value:0{width - 1}o}".encode() + b"\0"


def _header(name: bytes, size: int, kind: bytes) -> bytes:
    header = bytearray(512)
    header[0:len(name)] = name
    header[100:108] = _octal(0o644, 8)
    header[108:116] = _octal(0, 8)
    header[116:124] = _octal(0, 8)
    header[124:136] = _octal(size, 12)
    header[136:148] = _octal(0, 12)
    header[148:156] = b" " * 8
    header[156:157] = kind
    header[257:265] = b"ustar\x0000"
    header[148:156] = f"{sum(header):06o}".encode() + b"\0 "
    return bytes(header)


class TarWriter:
    """Append regular files to an uncompressed tar; `close()` writes the end-of-archive blocks."""

    def __init__(self, fileobj: BinaryIO):
        self.fileobj = fileobj

    def add(self, name: str, data: bytes) -> None:
        encoded = name.encode("utf-8")
        if len(encoded) > 100:  # a PAX extended header carries the full name
            body = _pax_entry("path", encoded)
            self._write(_header(b"././@PaxHeader", len(body), b"x"), body)
            encoded = encoded[:100]
        self._write(_header(encoded, len(data), b"0"), data)

    def _write(self, header: bytes, data: bytes) -> None:
        self.fileobj.write(header)
        self.fileobj.write(data)
        pad = -len(data) % 512
        if pad:
            self.fileobj.write(bytes(pad))

    def close(self) -> None:
        self.fileobj.write(bytes(1024))
        self.fileobj.close()


def _pax_entry(key: str, value: bytes) -> bytes:
    """One PAX record: "<length> key=value\n", where length counts itself."""
    payload = b" " + key.encode() + b"=" + value + b"\n"
    length = len(payload) + 1
    while len(str(length)) + len(payload) != length:
        length = len(str(length)) + len(payload)
    return str(length).encode() + payload
