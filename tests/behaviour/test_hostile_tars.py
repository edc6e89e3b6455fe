"""Malicious and malformed tars: each one ends in an error naming the file and byte offset, never
a hang, a crash or unbounded memory. The two inputs that used to loop forever run in a
subprocess with a timeout, so a regression fails instead of stalling the suite."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.compute as pc
import pytest

from stable_datasets.interleaved import InterleavedWebdatasetReader
from stable_datasets.interleaved.tar_format import TarFormatError, iter_tar
from stable_datasets.interleaved.webdataset_reader import InterleavedReadError


def header(name: bytes, size: int | bytes, kind: bytes = b"0") -> bytes:
    """A ustar header with a valid checksum; `size` may be raw field bytes to forge a bad one."""
    block = bytearray(512)
    block[0:len(name)] = name
    block[100:108] = b"0000644\0"
    block[124:136] = size if isinstance(size, bytes) else f"{size:011o}".encode() + b"\0"
    block[148:156] = b" " * 8
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = f"{sum(block):06o}".encode() + b"\0 "
    return bytes(block)


def member(name: bytes, data: bytes, kind: bytes = b"0") -> bytes:
    return header(name, len(data), kind) + data + bytes(-len(data) % 512)


def pax(records: bytes) -> bytes:
    return member(b"././@PaxHeader", records, b"x")


def write(path: Path, *parts: bytes) -> Path:
    path.write_bytes(b"".join(parts) + bytes(1024))
    return path


def error_of(path: Path) -> TarFormatError:
    with pytest.raises(TarFormatError) as info:
        list(iter_tar(path, memoryview(path.read_bytes())))
    return info.value


def test_pax_record_of_length_zero_and_negative_pax_size_end_quickly(tmp_path):
    """Both looped forever (the second also grew memory); bounded now by the bytes consumed."""
    zero = write(tmp_path / "zero.tar", pax(b"0 path=x\n"), member(b"a.json", b"{}"))
    negative = write(tmp_path / "neg.tar", pax(b"14 size=-1536\n"), member(b"a.json", b"{}"))
    script = textwrap.dedent(f"""
        from stable_datasets.interleaved.tar_format import TarFormatError, iter_tar
        for path in ({str(zero)!r}, {str(negative)!r}):
            try:
                list(iter_tar(path, memoryview(open(path, "rb").read())))
            except TarFormatError as exc:
                print(exc.offset, exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"512 {zero}: malformed PAX header record at byte 512",
        f"512 {negative}: PAX size '-1536' at byte 512 is not a non-negative integer",
    ]


@pytest.mark.parametrize("records, message", [
    (b"path=x\n", "malformed PAX header record at byte 512"),  # no length
    (b"99 path=x\n", "malformed PAX header record at byte 512"),  # length past the data
    (b"3 path=x\n", "malformed PAX header record at byte 512"),  # length shorter than its own digits+space
    (b"10 pathxx\n", r"malformed PAX header record at byte 512 \(not UTF-8 key=value\)"),  # no '='
    (b"11 path=\xff\xfe\n", r"malformed PAX header record at byte 512 \(not UTF-8 key=value\)"),
    (b"9 path=x!" + b"12 size=1e3\n", "malformed PAX header record at byte 512"),  # record not ending in newline
    (b"13 size=1e30\n", "PAX size '1e30' at byte 512 is not a non-negative integer"),
    (b"20 size=99999999999\n", r"member 'a.json' at byte 1536 needs 99999999999 bytes, 1536 are left"),
])
def test_malformed_pax_headers(tmp_path, records, message):
    path = write(tmp_path / "bad.tar", pax(records), member(b"a.json", b"{}"))
    error = error_of(path)
    assert str(path) in str(error)
    assert error.offset in (512, 1536)
    import re

    assert re.search(message, str(error)), str(error)


def test_negative_huge_and_garbled_sizes(tmp_path):
    negative = write(tmp_path / "neg.tar", header(b"a.json", b"-0000001000\0"), bytes(512))
    assert str(error_of(negative)) == f"{negative}: bad number b'-0000001000\\x00' in the tar header at byte 0"
    base256 = write(tmp_path / "b256.tar", header(b"a.json", b"\xff" * 12), bytes(512))
    assert str(error_of(base256)) == f"{base256}: member 'a.json' at byte 512 has a negative size (-1)"
    huge = write(tmp_path / "huge.tar", header(b"a.json", b"77777777777\0"), bytes(512))
    assert str(error_of(huge)) == (f"{huge}: truncated tar, member 'a.json' at byte 512 needs 8589934591 bytes, "
                                   "1536 are left")
    overflow = write(tmp_path / "over.tar", header(b"a.json", b"\x80" + b"\xff" * 11), bytes(512))
    assert "needs 309485009821345068724781055 bytes" in str(error_of(overflow))
    # a folder entry that claims data past the end of the file
    folder = write(tmp_path / "dir.tar", header(b"d/", b"77777777777\0", b"5"))
    assert "member 'd/' at byte 512 needs 8589934591 bytes" in str(error_of(folder))


def test_truncated_member_and_non_utf8_names(tmp_path):
    whole = member(b"a.json", b"{}") + member(b"b.png", b"x" * 2000)
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole[:1700])
    assert str(error_of(cut)) == f"{cut}: truncated tar, member 'b.png' at byte 1536 needs 2000 bytes, 164 are left"
    latin = write(tmp_path / "latin.tar", member(b"caf\xe9.json", b"{}"))
    assert str(error_of(latin)) == f"{latin}: member name b'caf\\xe9.json' in the tar header at byte 0 is not UTF-8"
    long_name = write(tmp_path / "gnu.tar", member(b"././@LongLink", b"\xff" * 120 + b"\0", b"L"),
                      member(b"short.json", b"{}"))
    assert error_of(long_name).offset == 512
    pax_name = write(tmp_path / "paxname.tar", pax(b"11 path=\xc3(\n"), member(b"a.json", b"{}"))
    assert "not UTF-8" in str(error_of(pax_name))


def test_reader_names_file_and_offset_and_skips_traversal(tmp_path):
    latin = write(tmp_path / "latin.tar", member(b"ok.json", json.dumps({"texts": ["x"]}).encode()),
                  member(b"caf\xe9.json", b"{}"))
    with pytest.raises(InterleavedReadError, match=r"latin.tar: member name .* at byte 1024 is not UTF-8"):
        InterleavedWebdatasetReader(latin).read()
    traversal = write(tmp_path / "evil.tar", member(b"../../etc/x.json", b"{}"),
                      pax(b"23 path=/abs/evil.json\n"), member(b"short.json", b"{}"),
                      member(b"ok.json", json.dumps({"texts": ["x"]}).encode()))
    reader = InterleavedWebdatasetReader(traversal)
    assert reader.read().num_items == 1  # only ok.json; traversal names are skipped, never followed
    assert [m.split(":", 1)[1] for m in reader.unsafe_members] == ["../../etc/x.json", "/abs/evil.json"]


def test_unusable_sample_json_names_file_member_and_offset(tmp_path):
    """JSON that parses but is not an object, or text that is not UTF-8, is our error."""
    path = write(tmp_path / "odd.tar", member(b"a.json", b"[1, 2]"))
    with pytest.raises(InterleavedReadError, match=r"odd.tar: member 'a.json' at byte 512: .*not a JSON object"):
        InterleavedWebdatasetReader(path).read()
    utf16 = write(tmp_path / "utf16.tar", member(b"a.json", '{"texts": ["x"]}'.encode("utf-16-le")))
    with pytest.raises(InterleavedReadError, match=r"utf16.tar: member 'a.json' at byte 512: "):
        InterleavedWebdatasetReader(utf16).read()


@pytest.mark.parametrize(("suffix", "compress"), [(".tar.gz", "gzip"), (".tgz", "gzip"), (".tar.bz2", "bz2"),
                                                  (".tar.xz", "lzma")])
def test_compressed_tars_read_like_the_plain_tar(tmp_path, suffix, compress):
    """Eager and lazy reads: a lazy image's byte range points into the decompressed tar."""
    import importlib

    import cv2
    import numpy as np

    from stable_datasets.interleaved import materialize

    png = cv2.imencode(".png", np.arange(48, dtype=np.uint8).reshape(4, 4, 3))[1].tobytes()
    docs = [part for i in range(3) for part in (
        member(f"d{i}.json".encode(), json.dumps({"texts": [f"hello {i}", None], "images": [None, f"d{i}.png"],
                                                   "url": f"u{i}"}).encode()),
        member(f"d{i}.png".encode(), png[:-1] + bytes([i])))]
    plain = write(tmp_path / "plain.tar", *docs)
    packed = tmp_path / "folder" / f"shard{suffix}"
    packed.parent.mkdir()
    packed.write_bytes(importlib.import_module(compress).compress(plain.read_bytes()))
    expected = InterleavedWebdatasetReader(plain, materialize_on_read=True).read().table
    for source in (packed, packed.parent):  # the file itself, and a folder of shards
        batch = InterleavedWebdatasetReader(source, materialize_on_read=True).read()
        assert batch.source_files == (str(packed),)
        assert batch.table.drop_columns(["source_ref"]).equals(expected.drop_columns(["source_ref"]))
        images = batch.table.filter(pc.equal(batch.table.column("modality"), "image"))
        assert [b[-1] for b in images.column("binary_content").to_pylist()] == [0, 1, 2]
        lazy = InterleavedWebdatasetReader(source).read().table
        assert lazy.column("binary_content").null_count == lazy.num_rows
        assert materialize(lazy).column("binary_content").equals(batch.table.column("binary_content"))


def test_damaged_and_truncated_gzip_tars_name_the_file(tmp_path):
    import gzip

    body = gzip.compress(write(tmp_path / "p.tar", member(b"a.json", b'{"texts": ["x"]}')).read_bytes())
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(body[: len(body) // 2])
    with pytest.raises(InterleavedReadError, match=r"cut.tar.gz: damaged gzip stream after \d+ decompressed bytes"):
        InterleavedWebdatasetReader(truncated).read()
    flipped = bytearray(body)
    flipped[-6] ^= 0xFF  # inside the CRC32 trailer: the data decompresses, the check fails
    bad_crc = tmp_path / "crc.tar.gz"
    bad_crc.write_bytes(bytes(flipped))
    with pytest.raises(InterleavedReadError,
                       match=r"crc.tar.gz: damaged gzip stream after \d+ decompressed bytes \(CRC check failed"):
        InterleavedWebdatasetReader(bad_crc).read()
