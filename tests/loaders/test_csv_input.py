"""csv_input: what pyarrow's CSV reader reads is the file's text as UTF-8, in reads that never end between "\\r"
and "\\n" (pyarrow drops a "\\n" that starts a block after a block ending in "\\r", also inside quotes)."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.loaders.csv_input import csv_input


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(['a', 'é', '\r', '\n', '"', ',']), max_size=80),
       sizes=st.lists(st.integers(1, 9), min_size=1, max_size=20),
       encoding=st.sampled_from(["utf-8", "utf-16", "utf-32-le", "latin-1"]))
def test_reads_give_the_text_as_utf8_and_never_end_inside_a_crlf(text, sizes, encoding):
    reader = csv_input(pa.py_buffer(text.encode(encoding)), encoding)
    pieces, turn = [], 0
    while True:
        size = sizes[turn % len(sizes)]
        piece = bytes(reader.read(size))
        turn += 1
        if not piece:
            break
        assert len(piece) <= size
        pieces.append(piece)
    assert b"".join(pieces) == text.encode("utf-8")
    for before, after in itertools.pairwise(pieces):
        assert not (before.endswith(b"\r") and after.startswith(b"\n")) or len(before) == 1


def test_a_file_is_read_from_a_byte_offset(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b"a,b\n1,2\n")
    assert bytes(csv_input(str(path), "utf8", 4).read()) == b"1,2\n"


def test_text_not_in_its_encoding_raises_unicode_error():
    with pytest.raises(UnicodeError):
        csv_input(pa.py_buffer(b"\xff\xfe\x00"), "utf-32").read(10)
