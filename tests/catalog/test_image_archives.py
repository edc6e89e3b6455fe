"""stable_datasets.catalog.formats.image_archives: one pass over tar, zip and RAR archives in stored order."""

from __future__ import annotations

import pytest

from stable_datasets.catalog.formats.image_archives import folder_label, lines_of, read_member, stream_members
from stable_datasets.errors import StableDatasetsError
from tests.fixtures.catalog import tar_bytes, zip_bytes
from tests.fixtures.image_archives import rar_bytes

MEMBERS = {"d/zebra/2.jpg": b"z2", "d/ant/9.jpg": b"a9", "d/labels.txt": b"ant\n\n zebra \n", "d/ant/1.jpg": b"a1"}
WRITERS = {"tar.gz": tar_bytes, "tar": lambda m: tar_bytes(m, "w"), "zip": zip_bytes, "rar": rar_bytes}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_members_come_in_stored_order_filtered_by_name(tmp_path, kind):
    path = tmp_path / f"a.{kind}"
    path.write_bytes(WRITERS[kind](MEMBERS))
    got = list(stream_members(path, lambda name: name.endswith(".jpg")))
    assert got == [("d/zebra/2.jpg", b"z2"), ("d/ant/9.jpg", b"a9"), ("d/ant/1.jpg", b"a1")]
    assert lines_of(read_member(path, "d/labels.txt")) == ["ant", "zebra"]
    with pytest.raises(StableDatasetsError, match=r"lacks the member 'd/none.txt'"):
        read_member(path, "d/none.txt")


def test_not_an_archive_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"plain text, no archive")
    with pytest.raises(StableDatasetsError, match=r"notes.txt: not a tar, zip or RAR archive"):
        list(stream_members(path, lambda name: True))


def test_folder_label_names_the_class_folder():
    classes = {"ant": 0, "zebra": 1}
    assert folder_label("d/zebra/2.jpg", classes) == 1
    assert folder_label("root/ant/sub/x.jpg", classes, depth=3) == 0
    assert folder_label("d/bee/1.jpg", classes) is None and folder_label("x.jpg", classes) is None
    with pytest.raises(StableDatasetsError, match=r"a.tgz: member 'd/bee/1.jpg' is in no known class folder"):
        folder_label("d/bee/1.jpg", classes, where="a.tgz")
