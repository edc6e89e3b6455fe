"""loaders.lines: line ends found in a file's bytes in any encoding (whole code units in UTF-16/32), ranges and
blocks of whole lines that decode alone and give back every line."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stable_datasets.loaders.lines import file_line_bytes, line_blocks, line_bytes, line_ranges

#: characters whose code units hold a 0x0A byte that is no line feed (上 is 0A 4E in UTF-16-LE, Ċ is 0A 01), a
#: surrogate pair, and line breaks
ALPHABET = ["a", "上", "Ċ", "੊", "😀", "é", "\n", "\r"]
ENCODINGS = ["utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be", "latin-1"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(ALPHABET), max_size=60), encoding=st.sampled_from(ENCODINGS),
       parts=st.integers(1, 6), block=st.integers(1, 24), big_endian=st.booleans())
def test_ranges_and_blocks_cut_whole_lines_that_decode_alone(tmp_path_factory, text, encoding, parts, block,
                                                             big_endian):
    if encoding == "latin-1":
        text = text.encode("latin-1", "replace").decode("latin-1")
    codec = encoding
    if encoding in ("utf-16", "utf-32") and big_endian:  # a byte-order mark naming big-endian
        codec = f"{encoding}-be"
    data = ("\ufeff" + text).encode(codec) if codec != encoding else text.encode(encoding)
    path = tmp_path_factory.mktemp("lines") / "f.txt"
    path.write_bytes(data)
    lines = file_line_bytes(str(path), encoding)
    decoded = []
    for _, start, stop in line_ranges(str(path), parts, lines=lines):
        for chunk, first_line in line_blocks(str(path), start, stop, block, lines=lines):
            piece = chunk.decode(lines.codec)  # strict: every block is whole code units
            assert first_line == sum(d.count("\n") for d in decoded)
            decoded.append(piece)
    assert "".join(decoded) == text
    assert all(piece.endswith("\n") for piece in decoded[:-1])  # each block ends its last line


@pytest.mark.parametrize(("encoding", "head", "codec", "mark"), [
    ("utf-16", b"\xff\xfe", "utf-16-le", 2), ("utf-16", b"\xfe\xff", "utf-16-be", 2),
    ("UTF_32", b"\x00\x00\xfe\xff", "utf-32-be", 4), ("utf-16-be", b"\xfe\xff", "utf-16-be", 0),
    ("utf-8-sig", b"\xef\xbb\xbf", "utf-8", 3), ("utf8", b"\xef\xbb\xbf", "utf-8", 0),
    ("latin-1", b"", "iso8859-1", 0)])
def test_the_byte_order_mark_names_the_codec_of_every_block(encoding, head, codec, mark):
    lines = line_bytes(encoding, head)
    assert (lines.codec, lines.mark, lines.newline) == (codec, mark, "\n".encode(codec))
