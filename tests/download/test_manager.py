from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import zipfile

import pytest

from stable_datasets import DownloadManager, RemoteFile
from stable_datasets.download.extract import UnsafeArchiveError
from stable_datasets.errors import ChecksumError, DownloadError
from tests.http_server import FileServer

PAYLOAD = os.urandom(300_000)
SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def server():
    with FileServer() as srv:
        srv.files["/data.bin"] = PAYLOAD
        yield srv


@pytest.fixture
def dl(tmp_path):
    return DownloadManager(tmp_path / "downloads", backoff=0.01, url_rewrites={})


def test_download_verifies_and_reuses(server, dl):
    path = dl.download(RemoteFile(server.url + "/data.bin", sha256=SHA))
    assert path.read_bytes() == PAYLOAD
    again = DownloadManager(dl.download_dir, url_rewrites={}).download(RemoteFile(server.url + "/data.bin", sha256=SHA))
    assert again == path and server.hits("/data.bin") == 1
    assert not list(dl.download_dir.glob("*.incomplete"))


def test_structures_map_to_paths(server, dl):
    server.files["/b.bin"] = b"bee"
    out = dl.download({"a": server.url + "/data.bin", "more": [server.url + "/b.bin"]})
    assert out["a"].read_bytes() == PAYLOAD and out["more"][0].read_bytes() == b"bee"


def test_truncated_response_is_resumed_with_a_range_request(server, dl):
    server.truncate["/data.bin"] = 1
    path = dl.download(RemoteFile(server.url + "/data.bin", sha256=SHA))
    assert path.read_bytes() == PAYLOAD
    ranges = [r for p, r in server.requests if p == "/data.bin"]
    assert ranges[0] is None and ranges[1] == f"bytes={len(PAYLOAD) // 2}-"


def test_partial_file_from_a_dead_process_is_resumed(server, dl):
    url = server.url + "/data.bin"
    dest_name = f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-data.bin"
    dl.download_dir.mkdir(parents=True)
    (dl.download_dir / (dest_name + ".incomplete")).write_bytes(PAYLOAD[:1000])
    path = dl.download(RemoteFile(url, sha256=SHA))
    assert path.read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", "bytes=1000-")]


def test_server_errors_are_retried_with_backoff(server, dl):
    server.fail["/data.bin"] = 2
    assert dl.download(server.url + "/data.bin").read_bytes() == PAYLOAD
    assert server.hits("/data.bin") == 3


def test_404_falls_back_to_mirror(server, dl):
    path = dl.download(RemoteFile(server.url + "/missing.bin", sha256=SHA, mirrors=(server.url + "/data.bin",)))
    assert path.read_bytes() == PAYLOAD
    assert server.hits("/missing.bin") == 1  # a 404 is not retried


def test_wrong_checksum_raises_and_keeps_nothing(server, dl):
    with pytest.raises(ChecksumError, match=f"expected sha256 {'0' * 64}, got {SHA}"):
        dl.download(RemoteFile(server.url + "/data.bin", sha256="0" * 64))
    assert not [p for p in dl.download_dir.iterdir() if p.name.endswith(("data.bin", ".incomplete"))]


def test_wrong_size_raises_naming_url_expected_and_got(server, dl):
    with pytest.raises(ChecksumError, match=f"/data.bin: expected 12 bytes, got {len(PAYLOAD)}"):
        dl.download(RemoteFile(server.url + "/data.bin", sha256=SHA, size=12))
    assert dl.download(RemoteFile(server.url + "/data.bin", sha256=SHA, size=len(PAYLOAD))).read_bytes() == PAYLOAD


def test_several_files_download_together_each_once(server, dl):
    """A structure of several files is fetched a few at a time; two specs of one URL fetch it once."""
    for i in range(6):
        server.files[f"/f{i}.bin"] = f"file {i}".encode()
    urls = [server.url + f"/f{i}.bin" for i in range(6)]
    out = dl.download({"all": urls, "again": urls[0], "first": RemoteFile(urls[0])})
    assert [p.read_bytes() for p in out["all"]] == [f"file {i}".encode() for i in range(6)]
    assert out["again"] == out["first"] == out["all"][0] and server.hits("/f0.bin") == 1
    server.fail["/f3.bin"] = 99  # one failing file is raised after the others have ended
    with pytest.raises(DownloadError, match="f3.bin"):
        DownloadManager(dl.download_dir, backoff=0.0, max_retries=1, url_rewrites={}, force_download=True).download(
            urls)


def test_checksums_can_be_skipped(server, tmp_path):
    dl = DownloadManager(tmp_path / "d", verify_checksums=False, url_rewrites={})
    assert dl.download(RemoteFile(server.url + "/data.bin", sha256="0" * 64)).read_bytes() == PAYLOAD


def test_all_urls_failing_lists_each(server, dl):
    with pytest.raises(DownloadError, match="(?s)missing.bin: HTTP 404.*gone.bin: HTTP 404"):
        dl.download(RemoteFile(server.url + "/missing.bin", mirrors=(server.url + "/gone.bin",)))


def test_url_rewrites(server, tmp_path):
    dl = DownloadManager(tmp_path / "d", url_rewrites={"https://example.invalid/files/": server.url + "/"})
    assert dl.download("https://example.invalid/files/data.bin").read_bytes() == PAYLOAD


def test_file_urls(tmp_path, dl):
    source = tmp_path / "local.txt"
    source.write_bytes(b"local data")
    assert dl.download(source.as_uri()).read_bytes() == b"local data"


def test_force_download_fetches_again(server, tmp_path):
    DownloadManager(tmp_path / "d", url_rewrites={}).download(server.url + "/data.bin")
    DownloadManager(tmp_path / "d", force_download=True, url_rewrites={}).download(server.url + "/data.bin")
    assert server.hits("/data.bin") == 2


def _tar_bytes(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["tar", "tar.gz", "zip"])
def test_extract_archives(tmp_path, dl, kind):
    archive = tmp_path / f"a.{kind}"
    members = {"top/one.txt": b"1", "top/sub/two.txt": b"22"}
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
    else:
        archive.write_bytes(_tar_bytes(members, "w:gz" if kind == "tar.gz" else "w"))
    out = dl.extract(archive)
    assert (out / "top/sub/two.txt").read_bytes() == b"22"
    assert dl.extract(archive) == out  # reused
    assert sorted(name for name, _ in dl.iter_archive(archive)) == sorted(members)


def test_extract_gz_single_file(tmp_path, dl):
    archive = tmp_path / "labels.idx.gz"
    archive.write_bytes(gzip.compress(b"payload"))
    out = dl.extract(archive)
    assert out.name == "labels.idx" and out.read_bytes() == b"payload"


@pytest.mark.parametrize("name", ["../escape.txt", "/abs/escape.txt"])
def test_unsafe_tar_members_are_refused(tmp_path, dl, name):
    archive = tmp_path / "evil.tar"
    archive.write_bytes(_tar_bytes({name: b"x"}, "w"))
    with pytest.raises(UnsafeArchiveError, match="would be written outside the target folder"):
        dl.extract(archive)
    assert not (tmp_path / "escape.txt").exists()
    assert not [p for p in (dl.download_dir / "extracted").iterdir() if p.is_dir()]
