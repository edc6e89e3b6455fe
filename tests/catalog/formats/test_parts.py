"""A file published in parts, read as one seekable file."""

from __future__ import annotations

import io
import os
import zipfile

from stable_datasets.catalog.formats.parts import ConcatenatedFile, open_parts


def write_parts(folder, data: bytes, cuts: list[int]) -> list[str]:
    paths = []
    for number, (start, stop) in enumerate(zip([0, *cuts], [*cuts, len(data)])):
        path = os.path.join(folder, f"file-{number:02d}")
        with open(path, "wb") as fh:
            fh.write(data[start:stop])
        paths.append(path)
    return paths


def test_reads_and_seeks_across_part_boundaries(tmp_path):
    data = bytes(range(256)) * 4
    paths = write_parts(tmp_path, data, [10, 10, 700])  # an empty part too
    with ConcatenatedFile(paths) as fh:
        assert fh.size == len(data) and fh.read() == data
        fh.seek(5)
        assert fh.read(20) == data[5:25] and fh.tell() == 25
        fh.seek(-4, io.SEEK_END)
        assert fh.read(100) == data[-4:] and fh.read(1) == b""
        fh.seek(690)
        fh.seek(20, io.SEEK_CUR)
        assert fh.read(3) == data[710:713]


def test_a_zip_cut_in_parts_opens_in_place(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for number in range(4):
            archive.writestr(f"videos/{number}.bin", os.urandom(2000) + bytes([number]))
    data = buf.getvalue()
    with open_parts(write_parts(tmp_path, data, [1500, 5000])) as fh, zipfile.ZipFile(fh) as parts, \
            zipfile.ZipFile(io.BytesIO(data)) as whole:
        assert parts.namelist() == whole.namelist()
        assert all(parts.read(name) == whole.read(name) for name in whole.namelist())
