"""The viewer's HTTP API against a real server on 127.0.0.1: listing, paging, stats, media, bad requests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import cv2
import numpy as np
import pytest

from stable_datasets.viewer import serve_in_thread


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def get_json(url: str) -> object:
    status, kind, body = get(url)
    assert status == 200, body
    assert kind == "application/json"
    return json.loads(body)


def caches_by_name(url: str) -> dict[tuple[str, str], dict]:
    return {(c["name"], c["config"]): c for c in get_json(url + "/api/caches")}


def test_caches_lists_every_cache_with_its_facts(viewer):
    url, _, made = viewer
    caches = caches_by_name(url)
    assert set(caches) == {("digits", "default"), ("moving_digits", "path"), ("moving_digits", "frames"),
                           ("sft", "default"), ("in_memory", "from_dict")}
    digits = caches[("digits", "default")]
    meta = made["digits"].cache_metadata[0]
    assert {k: digits[k] for k in ("split", "layout", "rows", "bytes", "status")} == {
        "split": "train", "layout": "arrow_shards", "rows": len(made["digits"]), "bytes": meta.num_bytes,
        "status": "current"}
    assert len(digits["id"]) == 12 and digits["fingerprint"] == meta.fingerprint
    assert caches[("sft", "default")]["layout"] == "parquet_shards"
    assert get_json(f"{url}/api/caches/{digits['id']}")["rows"] == len(made["digits"])
    info = made["digits"].info  # the dataset's card: what its builder says of it, empty fields left out
    assert digits["card"] == {k: v for k, v in (("description", info.description), ("homepage", info.homepage),
                                                ("license", info.license), ("citation", info.citation)) if v}
    assert digits["card"]["description"]
    # inputs: the files read (not the loader's class), the builder's script, or where in-memory data came from
    assert {key: c["inputs"] for key, c in caches.items()} == {
        ("digits", "default"): "digits.py", ("moving_digits", "path"): "moving_digits.py",
        ("moving_digits", "frames"): "moving_digits.py", ("sft", "default"): "chat.jsonl",
        ("in_memory", "from_dict"): "data in memory (from_dict)"}


def test_rows_page_an_offset_slice_with_image_urls(viewer):
    url, _, made = viewer
    digits = caches_by_name(url)[("digits", "default")]
    page = get_json(f"{url}/api/caches/{digits['id']}/rows?offset=100&limit=3")
    assert [r["index"] for r in page["rows"]] == [100, 101, 102]
    assert page["total"] == len(made["digits"]) and page["columns"] == ["image", "label"]
    first = page["rows"][0]["cells"]
    label = int(made["digits"][100]["label"])
    assert first["label"] == {"kind": "label", "value": label, "name": str(label)}
    assert first["image"]["url"] == f"/media/{digits['id']}/100/image.png"
    status, kind, png = get(url + first["image"]["url"])
    assert (status, kind) == (200, "image/png")
    decoded = cv2.cvtColor(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    np.testing.assert_array_equal(decoded, made["digits"][100]["image"])  # 8x8: a thumbnail keeps its pixels
    last = get_json(f"{url}/api/caches/{digits['id']}/rows?offset={len(made['digits']) - 2}&limit=50")
    assert [r["index"] for r in last["rows"]] == [len(made["digits"]) - 2, len(made["digits"]) - 1]


def test_video_rows_render_as_frame_strips(viewer):
    url, _, _ = viewer
    caches = caches_by_name(url)
    for config, frames_per_row in (("path", 8), ("frames", 8)):
        cache = caches[("moving_digits", config)]
        row = get_json(f"{url}/api/caches/{cache['id']}/rows?limit=1")["rows"][0]["cells"]["video"]
        assert row["kind"] == "video"
        status, kind, png = get(url + row["url"])
        assert (status, kind) == (200, "image/png")
        strip = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
        # 8 frames of a 64x64 video at 96 px high, 2 px apart
        assert strip.shape == (96, frames_per_row * 96 + (frames_per_row - 1) * 2, 3)
        assert strip.max() > 0  # the digits are drawn


def test_packs_show_sequence_bounds_loss_runs_and_text(viewer):
    url, _, made = viewer
    cache = caches_by_name(url)[("sft", "default")]
    view = get_json(f"{url}/api/caches/{cache['id']}/rows?limit=1")["rows"][0]["view"]
    row = made["packs"][0]
    starts = list(row["seq_start_id"])
    assert view["kind"] == "pack" and view["length"] == len(row["input_ids"])
    assert [(s["start"], s["end"]) for s in view["sequences"]] == list(zip(starts, [*starts[1:], view["length"]]))
    mask = np.asarray(row["loss_mask"])
    for s in view["sequences"]:
        shaded = np.zeros(len(mask), bool)
        for a, b in s["loss"]:
            shaded[a:b] = True
        np.testing.assert_array_equal(shaded[s["start"]:s["end"]], mask[s["start"]:s["end"]] != 0)
    first = view["sequences"][0]["text"]
    assert first.startswith("What is ") and "It is " in first  # the byte tokenizer's text


def test_documents_are_laid_out_in_order(viewer):
    url, _, _ = viewer
    cache = caches_by_name(url)[("in_memory", "from_dict")]
    rows = get_json(f"{url}/api/caches/{cache['id']}/rows")["rows"]
    items = rows[0]["view"]["items"]
    assert [i["kind"] for i in items] == ["text", "image", "text"]
    assert items[0]["text"] == "First paragraph." and items[2]["text"] == "Last words."
    status, kind, png = get(url + items[1]["url"])
    assert (status, kind) == (200, "image/png")
    assert cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR).shape == (24, 32, 3)
    assert [i["kind"] for i in rows[1]["view"]["items"]] == ["image", "text"]


def test_stats_are_bounded_and_kept_beside_the_cache_not_in_it(viewer_root, tmp_path):
    root, made = viewer_root
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if ".viewer" not in p.parts}
    server, url = _server(root, sample_size=100)
    try:
        digits = caches_by_name(url)[("digits", "default")]
        stats = get_json(f"{url}/api/caches/{digits['id']}/stats")
    finally:
        server.shutdown()
        server.server_close()
    assert (stats["rows"], stats["sample_size"], stats["sampled"]) == (len(made["digits"]), 100, True)
    labels = stats["columns"]["label"]
    assert labels["kind"] == "labels" and sum(n for _, n in labels["counts"]) == 100
    kept = list((root / ".viewer" / "stats").glob("*-100.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == stats
    after = {p: p.stat().st_mtime_ns for p in root.rglob("*") if ".viewer" not in p.parts}
    assert after == before  # nothing written anywhere else under the root


def _server(root: Path, sample_size: int):
    from stable_datasets.viewer import make_server, server_url

    server = make_server(root, sample_size=sample_size)
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server_url(server)


@pytest.mark.parametrize("path", [
    "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/caches/..%2F..%2Fetc%2Fpasswd",
    "/api/caches/..%2f..%2fetc%2fpasswd/rows", "/media/..%2F..%2F/0/image.png", "/media/%252e%252e/0/x.png",
    "//etc/passwd", "/api/caches/%2e%2e", "/caches/%2e%2e%2f%2e%2e%2f_metadata.json",
])
def test_no_path_reaches_a_file(viewer, path):
    url, _, _ = viewer
    status, _, body = get(url + path)
    assert status == 404
    assert b"root:" not in body
    assert len(body.decode().strip().splitlines()) == 1  # one line, no traceback


def test_bad_requests_say_what_was_wrong(viewer):
    url, _, made = viewer
    digits = caches_by_name(url)[("digits", "default")]
    n = len(made["digits"])
    cases = {
        "/api/caches/0123456789ab/rows": (404, "no cache with id '0123456789ab' under "),
        "/api/caches/nothex/rows": (404, "no cache with id 'nothex' (an id is 12 hex digits"),
        f"/api/caches/{digits['id']}/rows?offset={n}": (404, f"offset {n} is past the end of cache {digits['id']} "
                                                             f"({n:,} rows)"),
        f"/api/caches/{digits['id']}/rows?offset=-1": (400, "offset must be a non-negative integer, got '-1'"),
        f"/api/caches/{digits['id']}/rows?offset=abc": (400, "offset must be a non-negative integer, got 'abc'"),
        f"/api/caches/{digits['id']}/rows?limit=0": (400, "limit must be between 1 and 200, got 0"),
        f"/api/caches/{digits['id']}/rows?limit=5&limit=6": (400, "limit is given 2 times; give it once"),
        f"/api/caches/{digits['id']}/rows?page=2": (400, "unknown query parameter 'page'"),
        f"/media/{digits['id']}/{n}/image.png": (404, f"no row '{n}' in cache {digits['id']}"),
        f"/media/{digits['id']}/0/nope.png": (404, "no column 'nope' in cache"),
        f"/media/{digits['id']}/0/label.png": (404, "column 'label' holds no images or videos"),
        "/api/nothing": (404, "no such page: /api/nothing"),
    }
    for path, (status, message) in cases.items():
        got, kind, body = get(url + path)
        assert (got, kind) == (status, "application/json"), path
        assert json.loads(body)["error"].startswith(message), (path, body)
    got, kind, body = get(url + "/caches/0123456789ab")
    assert (got, kind) == (404, "text/plain; charset=utf-8")
    assert body.decode().startswith("no cache with id '0123456789ab'") and body.count(b"\n") == 1
    request = urllib.request.Request(url + "/api/caches", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 405
    assert json.loads(refused.value.read())["error"] == "POST is not allowed: the viewer is read-only (GET only)"


def test_pages_are_self_contained(viewer):
    url, _, _ = viewer
    digits = caches_by_name(url)[("digits", "default")]
    for path in ("/", f"/caches/{digits['id']}"):
        status, kind, body = get(url + path)
        assert (status, kind) == (200, "text/html; charset=utf-8")
        assert b"http://" not in body and b"https://" not in body and b"src=\"//" not in body  # works offline


def test_view_command_prints_its_url_first_and_binds_localhost(viewer_root):
    root, _ = viewer_root
    env = dict(os.environ, STABLE_DATASETS_CACHE_DIR=str(root))
    proc = subprocess.Popen([sys.executable, "-m", "stable_datasets.cli", "view", "--port", "0"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline().strip()
        assert first.startswith("http://127.0.0.1:") and int(first.rsplit(":", 1)[1]) > 0
        caches = json.loads(urllib.request.urlopen(first + "/api/caches").read())
        assert len(caches) == 5
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a quiet stop
        assert proc.wait(timeout=20) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_view_refuses_a_bad_port(capsys):
    from stable_datasets.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["view", "--port", "70000"])
    assert exited.value.code == 2
    assert "expected a port number 0-65535 (0: any free port), got '70000'" in capsys.readouterr().err


def test_an_empty_root_lists_nothing(tmp_path):
    server, url = serve_in_thread(tmp_path / "empty")
    try:
        assert get_json(url + "/api/caches") == []
    finally:
        server.shutdown()
        server.server_close()


def _get_with_host(url: str, host: str | None, path: str = "/api/caches") -> tuple[int, dict, bytes]:
    """A raw request with the Host header a browser would send after a DNS rebinding (or none at all)."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_a_request_for_another_host_name_is_refused_dns_rebinding(viewer):
    """A page on evil.example whose name rebinds to 127.0.0.1 reads the viewer from the browser with Host
    evil.example: it gets 403, whatever the path or method; the names of this machine's loopback are served."""
    url, _, _ = viewer
    port = url.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"localhost.evil:{port}"):
        status, headers, body = _get_with_host(url, host)
        assert status == 403, host
        assert json.loads(body) == {"error": f"the Host {host!r} is not an address this viewer serves "
                                             "(127.0.0.1, localhost, [::1]); a page of another site (DNS rebinding) "
                                             "cannot read it"}
        assert not any(k.lower().startswith("access-control-") for k in headers)
    assert _get_with_host(url, f"evil.example:{port}", "/")[0] == 403
    assert _get_with_host(url, None)[0] == 403  # HTTP/1.1 requires Host: a request without one is no browser's
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", "localhost", f"[::1]:{port}"):
        status, headers, body = _get_with_host(url, host)
        assert status == 200, host
        assert isinstance(json.loads(body), list)
        assert not any(k.lower().startswith("access-control-") for k in headers)  # and no CORS


def test_a_viewer_on_a_named_host_serves_that_name(viewer_root):
    root, _ = viewer_root
    server, url = serve_in_thread(root, host="127.0.0.1")
    try:
        port = url.rsplit(":", 1)[1]
        assert _get_with_host(url, f"127.0.0.1:{port}")[0] == 200
    finally:
        server.shutdown()
        server.server_close()
    from stable_datasets.viewer.server import allowed_hosts

    assert allowed_hosts("10.1.2.3") == {"127.0.0.1", "localhost", "::1", "10.1.2.3"}
    assert allowed_hosts("My-Box.Local") == {"127.0.0.1", "localhost", "::1", "my-box.local"}


def test_a_page_marks_a_corrupt_cell_and_serves_the_rest(tmp_path):
    """One damaged image failed the whole page (a 500): the page decodes a row at a time, and a row that cannot be
    decoded whole has its cells decoded alone, the damaged one marked."""
    import stable_datasets as sds
    from stable_datasets.cache.builds import current_build

    pictures = [cv2.imencode(".png", np.full((8, 8, 3), 60 * i, np.uint8))[1].tobytes() for i in range(3)]
    ds = sds.StableDataset.from_dict({"image": pictures, "label": [0, 1, 2]},
                                     features=sds.Features({"image": sds.Image(), "label": sds.Value("int64")}),
                                     cache_dir=tmp_path / "cache")
    build = current_build(ds.cache_dirs[0].parent / ds.cache_dirs[0].name.split("@")[0])
    del ds
    shard = next(build.glob("*.arrow"))
    data = shard.read_bytes()
    at = data.index(pictures[1]) + 8  # past the PNG signature: the header chunk of row 1's image
    shard.chmod(0o644)
    with open(shard, "r+b") as fh:
        fh.seek(at)
        fh.write(b"\0" * 24)
    server, url = serve_in_thread(tmp_path / "cache")
    try:
        key = get_json(url + "/api/caches")[0]["id"]
        page = get_json(f"{url}/api/caches/{key}/rows?offset=0&limit=3")
    finally:
        server.shutdown()
        server.server_close()
    kinds = [(r["cells"]["image"]["kind"], r["cells"]["label"]) for r in page["rows"]]
    assert kinds == [("image", {"kind": "value", "value": 0}), ("error", {"kind": "value", "value": 1}),
                     ("image", {"kind": "value", "value": 2})]
    assert page["rows"][1]["cells"]["image"]["text"].startswith("cannot decode: ")
