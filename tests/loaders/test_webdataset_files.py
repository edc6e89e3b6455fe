"""A WebDataset member that is a link is refused naming it (it holds no bytes), not dropped."""

from __future__ import annotations

import io
import tarfile

import pytest

import stable_datasets as sds
from stable_datasets.loaders.columns import LoaderError


def _member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_a_link_member_is_named_not_dropped(tmp_path, kind):
    """Before: the link was skipped, and the error said the sample lacked its 'txt' column."""
    shard = tmp_path / "a.tar"
    with tarfile.open(shard, "w") as tar:
        _member(tar, "k1.txt", b"one")
        _member(tar, "k1.cls", b"1")
        link = tarfile.TarInfo("k2.txt")
        link.type, link.linkname = kind, "k1.txt"
        tar.addfile(link)
        _member(tar, "k2.cls", b"2")
    with pytest.raises(LoaderError, match=rf"^{shard}, member 'k2.txt' \(byte 2048\): a link to 'k1.txt', not a "
                                          r"file; a WebDataset shard must hold each member's bytes: write the tar "
                                          r"without links \(tar --dereference\)$"):
        sds.load_dataset("webdataset", data_files=str(shard), split="train")
