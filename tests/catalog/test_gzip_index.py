"""stable_datasets.catalog.formats.gzip_index: seeks in a gzip file cost at most a checkpoint's spacing."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.gzip_index import SeekableGzip, open_seekable_gzip
from stable_datasets.errors import StableDatasetsError
from tests.fixtures.catalog import tar_bytes

#: 3 MiB of incompressible bytes then 1 MiB of text, as two concatenated gzip members
DATA = np.random.default_rng(7).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes() + b"stable datasets\n" * 65536
SPACING = 256 * 1024


@pytest.fixture(scope="module")
def gz_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("gz") / "data.gz"
    path.write_bytes(gzip.compress(DATA[:2_000_000], mtime=0) + gzip.compress(DATA[2_000_000:], mtime=0))
    return path


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(DATA) + 10), st.integers(0, 300_000)), min_size=1, max_size=6))
def test_any_seek_and_read_gives_the_bytes_there(gz_path, reads):
    with open_seekable_gzip(gz_path, spacing=SPACING) as fh:
        for offset, size in reads:
            fh.seek(offset)
            data = fh.read(size)
            assert data == DATA[offset:offset + size] and fh.tell() == offset + len(data)


def test_going_backwards_decompresses_at_most_a_spacing_again(gz_path):
    fh = open_seekable_gzip(gz_path, spacing=SPACING)
    offsets = list(range(len(DATA) - 4096, 0, -300_000))  # end to start: the worst order for gzip.GzipFile
    for offset in offsets:
        fh.seek(offset)
        assert fh.read(4096) == DATA[offset:offset + 4096]
    # a first pass to the end, then per backward read at most one spacing and one output step (1 MiB) again;
    # gzip.GzipFile would decompress everything before each offset again (about 14 times the data here)
    assert fh.raw.decompressed <= len(DATA) + len(offsets) * (SPACING + (1 << 20))
    fh.close()


def test_a_raw_read_may_be_short_but_never_wrong(gz_path):
    with SeekableGzip(gz_path, spacing=SPACING) as raw:
        raw.seek(len(DATA) - 10)
        assert raw.read(100) == DATA[-10:] and raw.read(5) == b""
        raw.seek(1_999_990)  # across the boundary of the two gzip members
        got = b"".join(iter(lambda: raw.read(7), b""))[:30]
        assert got == DATA[1_999_990:2_000_020]


def test_a_truncated_gzip_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(DATA[:500_000], mtime=0)[:100_000])
    with open_seekable_gzip(path) as fh, pytest.raises(StableDatasetsError, match=r"cut.gz: the gzip stream ends"):
        fh.read()


def test_members_in_order_reads_a_tar_gz_out_of_stored_order(tmp_path):
    members = {f"d/{i:03d}.bin": bytes([i]) * 40_000 for i in range(60)}
    path = tmp_path / "a.tar.gz"
    path.write_bytes(tar_bytes(members))
    names = [f"d/{i:03d}.bin" for i in (59, 3, 30, 0, 58)]
    assert [(name, fh.read()) for name, fh in members_in_order(path, names)] == \
        [(name, members[name]) for name in names]
