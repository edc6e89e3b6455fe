"""Generic loaders of media: imagefolder, videofolder, webdataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

import stable_datasets as sds
from stable_datasets.errors import ExampleError
from stable_datasets.interleaved.tar_format import TarWriter
from stable_datasets.loaders import LoaderError


def _digits(n: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    return np.round(digits.images[:n] * (255 / 16)).astype(np.uint8), digits.target[:n]


def _png(image: np.ndarray) -> bytes:
    return cv2.imencode(".png", image)[1].tobytes()


def _image_folder(root: Path, n: int = 30, split_folders: bool = False) -> dict[str, list[int]]:
    """Real digits as PNGs in <root>/[split/]<class name>/<i>.png; returns split -> pixel sums in file order."""
    images, targets = _digits(n)
    names = {0: "zero", 1: "one", 2: "two"}
    expected: dict[str, list[tuple[str, int]]] = {}
    for i, (image, target) in enumerate(zip(images, targets)):
        label = names.get(int(target) % 3)
        split = ("test" if i % 5 == 0 else "train") if split_folders else "train"
        folder = root / split / label if split_folders else root / label
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{i:04d}.png"
        path.write_bytes(_png(image))
        expected.setdefault(split, []).append((str(path), int(image.sum())))
    return {split: [s for _, s in sorted(rows)] for split, rows in expected.items()}


def test_imagefolder_labels_from_sorted_folder_names(tmp_path):
    sums = _image_folder(tmp_path / "imgs")
    ds = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")
    assert ds.features == sds.Features({"image": sds.Image(), "label": sds.ClassLabel(names=["one", "two", "zero"])})
    assert len(ds) == 30
    assert [int(ds[i]["image"].sum()) // 3 for i in range(len(ds))] == sums["train"]  # RGB from grayscale
    names = ds.features["label"].names
    files = sorted(str(p) for p in (tmp_path / "imgs").rglob("*.png"))
    assert [names[label] for label in ds["label"]] == [Path(f).parent.name for f in files]


def test_imagefolder_labels_match_hugging_face(tmp_path):
    import datasets

    _image_folder(tmp_path / "imgs")
    ours = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")
    theirs = datasets.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train",
                                   cache_dir=str(tmp_path / "hf"))
    assert ours.features["label"].names == theirs.features["label"].names
    assert sorted(ours["label"]) == sorted(theirs["label"])


def test_imagefolder_split_folders_and_folder_inference(tmp_path):
    sums = _image_folder(tmp_path / "imgs", split_folders=True)
    dd = sds.load_dataset(str(tmp_path / "imgs"))
    assert sorted(dd) == ["test", "train"]
    assert [int(r["image"].sum()) // 3 for r in dd["test"]] == sums["test"]
    assert dd["train"].features["label"].names == ["one", "two", "zero"]


def test_imagefolder_single_folder_has_no_label_and_drop_labels_false_forces_one(tmp_path):
    folder = tmp_path / "flat"
    folder.mkdir()
    images, _ = _digits(3)
    for i, image in enumerate(images):
        (folder / f"{i}.png").write_bytes(_png(image))
    ds = sds.load_dataset("imagefolder", data_dir=str(folder), split="train")
    assert dict(ds.features) == {"image": sds.Image()}
    forced = sds.load_dataset("imagefolder", data_dir=str(folder), split="train", drop_labels=False)
    assert forced.features["label"].names == ["flat"] and forced["label"] == [0, 0, 0]


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_imagefolder_metadata_beside_images(tmp_path, kind):
    folder = tmp_path / "captioned"
    (folder / "sub").mkdir(parents=True)
    images, targets = _digits(4)
    records = []
    for i, image in enumerate(images):
        name = f"sub/{i}.png" if i % 2 else f"{i}.png"
        (folder / name).write_bytes(_png(image))
        records.append({"file_name": name, "caption": f"digit {targets[i]}", "n": i})
    if kind == "csv":
        (folder / "metadata.csv").write_text("file_name,caption,n\n" + "".join(
            f"{r['file_name']},{r['caption']},{r['n']}\n" for r in records))
    else:
        (folder / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    ds = sds.load_dataset("imagefolder", data_dir=str(folder), split="train")
    assert dict(ds.features) == {"image": sds.Image(), "caption": sds.Value("string"), "n": sds.Value("int64")}
    assert ds["caption"] == [f"digit {t}" for t in targets] and ds["n"] == [0, 1, 2, 3]
    assert int(ds[3]["image"].sum()) == 3 * int(images[3].sum())
    # editing the metadata rebuilds
    (folder / f"metadata.{kind}").write_text((folder / f"metadata.{kind}").read_text().replace("digit", "number"))
    stat = (folder / f"metadata.{kind}").stat()
    os.utime(folder / f"metadata.{kind}", ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    assert sds.load_dataset("imagefolder", data_dir=str(folder), split="train")["caption"][0].startswith("number")


def test_a_metadata_csv_caption_may_hold_quoted_line_breaks_across_parse_blocks(tmp_path):
    folder = tmp_path / "captioned"
    folder.mkdir()
    images, _ = _digits(2)
    for i, image in enumerate(images):
        (folder / f"{i}.png").write_bytes(_png(image))
    head = b'file_name,caption\r\n0.png,"'
    long = "x" * ((1 << 20) - 1 - len(head)) + "\r\ny"  # its "\r" the last byte of pyarrow's first 1 MiB block
    (folder / "metadata.csv").write_bytes(head + long.encode() + b'"\r\n1.png,"a\nb"\r\n')
    ds = sds.load_dataset("imagefolder", data_dir=str(folder), split="train")
    assert ds["caption"] == [long, "a\nb"]  # as pandas (so Hugging Face) reads them


def test_an_image_a_metadata_file_names_is_part_of_the_fingerprint(tmp_path):
    # data_files naming only the metadata file (HF reads the images it lists): before, an image
    # edited in place was not in the fingerprint and the old pixels were served
    folder = tmp_path / "pets"
    folder.mkdir()
    (folder / "a.png").write_bytes(_png(np.full((4, 4), 10, np.uint8)))
    (folder / "metadata.jsonl").write_text('{"file_name": "a.png", "caption": "x"}\n')
    files = str(folder / "metadata.jsonl")
    assert sds.load_dataset("imagefolder", data_files=files, split="train")[0]["image"][0, 0, 0] == 10
    (folder / "a.png").write_bytes(_png(np.full((4, 4), 99, np.uint8)))
    stat = (folder / "a.png").stat()  # a new mtime even on a coarse clock
    os.utime(folder / "a.png", ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    ds = sds.load_dataset("imagefolder", data_files=files, split="train")
    assert ds[0]["image"][0, 0, 0] == 99
    entries = ds.cache_metadata[0].fingerprint_inputs["input_files"]["named_by_metadata"]["entries"]
    assert [e[0] for e in entries] == [str(folder / "a.png")]


def test_imagefolder_metadata_file_name_outside_the_folder_is_refused(tmp_path):
    folder = tmp_path / "evil"
    folder.mkdir()
    images, _ = _digits(1)
    (folder / "0.png").write_bytes(_png(images[0]))
    (tmp_path / "secret.png").write_bytes(_png(images[0]))
    (folder / "metadata.csv").write_text("file_name,caption\n../secret.png,x\n")
    with pytest.raises(LoaderError, match=r"metadata\.csv, record 1: file_name '\.\./secret\.png' must be a relative"):
        sds.load_dataset("imagefolder", data_dir=str(folder), split="train")


def test_unreadable_image_names_the_file(tmp_path):
    _image_folder(tmp_path / "imgs", n=6)
    victim = sorted((tmp_path / "imgs").rglob("*.png"))[2]
    victim.write_bytes(victim.read_bytes()[:40])  # truncated
    with pytest.raises(ExampleError, match=rf"{victim.name}.*undecodable image"):
        sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")


def test_a_png_with_a_damaged_byte_in_its_pixel_data_names_the_file(tmp_path):
    # signature, header and end marker intact: before, the image was stored and the first read of
    # that row failed with 'stored image ... could not be decoded (the cache is damaged ...)'
    _image_folder(tmp_path / "imgs", n=6)
    victim = sorted((tmp_path / "imgs").rglob("*.png"))[2]
    data = bytearray(victim.read_bytes())
    start = data.index(b"IDAT") + 4
    data[start + 5] ^= 0x10  # inside the compressed pixels: the chunk's CRC no longer matches
    victim.write_bytes(bytes(data))
    with pytest.raises(ExampleError, match=rf"example key '{victim}', field 'image': undecodable image: "
                                           rf"{len(data)} bytes starting with 0x89504e47"):
        sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")
    assert not list((tmp_path / "imgs").parent.rglob("_metadata.json"))


def test_imagefolder_adding_an_image_rebuilds_and_num_proc_gives_the_same_rows(tmp_path):
    _image_folder(tmp_path / "imgs", n=20)
    one = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")
    two = sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train", num_proc=2,
                           storage_format="parquet")
    assert two["label"] == one["label"] and all(np.array_equal(a["image"], b["image"]) for a, b in zip(one, two))
    images, _ = _digits(21)
    (tmp_path / "imgs" / "zero" / "9999.png").write_bytes(_png(images[20]))
    assert len(sds.load_dataset("imagefolder", data_dir=str(tmp_path / "imgs"), split="train")) == 21


def _video(path: Path, frames: int, value: int) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (32, 32), True)
    for _ in range(frames):
        writer.write(np.full((32, 32, 3), value, np.uint8))
    writer.release()


def test_videofolder_labels_and_stored_files(tmp_path):
    for label, value in (("cats", 40), ("dogs", 200)):
        (tmp_path / "vids" / label).mkdir(parents=True)
        for i in range(2):
            _video(tmp_path / "vids" / label / f"{i}.mp4", 3 + i, value)
    ds = sds.load_dataset("videofolder", data_dir=str(tmp_path / "vids"), split="train")
    assert ds.features["label"].names == ["cats", "dogs"] and ds["label"] == [0, 0, 1, 1]
    assert sorted(ds.features) == ["label", "video"]
    files = sorted((tmp_path / "vids").rglob("*.mp4"))
    assert [ds[i]["video"].read_bytes() for i in range(4)] == [f.read_bytes() for f in files]
    assert ds[0]["video"].extension == "mp4"


# -- webdataset ----------------------------------------------------------------------------------
def _shard(path: Path, samples: list[tuple[str, dict[str, bytes]]]) -> None:
    writer = TarWriter(open(path, "wb"))  # noqa: SIM115 - TarWriter.close() closes it
    for key, members in samples:
        for extension, data in members.items():
            writer.add(f"{key}.{extension}", data)
    writer.close()


def test_webdataset_groups_members_by_key(tmp_path):
    images, targets = _digits(6)
    for shard in range(2):
        _shard(tmp_path / f"shard-{shard}.tar", [
            (f"s{shard}/{i:03d}", {"png": _png(images[3 * shard + i]), "cls": str(int(targets[3 * shard + i])).encode(),
                                   "json": json.dumps({"i": 3 * shard + i, "tags": ["a"]}).encode(),
                                   "txt": f"caption {i}".encode()})
            for i in range(3)])
    ds = sds.load_dataset("webdataset", data_files=str(tmp_path / "*.tar"), split="train")
    assert sorted(ds.features) == sorted(["__key__", "__url__", "png", "cls", "json", "txt"])
    assert ds.features["png"] == sds.Image() and ds.features["cls"] == sds.Value("int64")
    assert ds["__key__"] == [f"s{s}/{i:03d}" for s in range(2) for i in range(3)]
    assert ds["cls"] == [int(t) for t in targets]
    assert ds["json"] == [{"i": i, "tags": ["a"]} for i in range(6)]
    assert int(ds[4]["png"].sum()) == 3 * int(images[4].sum())
    assert ds["__url__"][0].endswith("shard-0.tar")


def test_webdataset_sample_missing_a_member_names_shard_and_key(tmp_path):
    _shard(tmp_path / "a.tar", [("k1", {"txt": b"x", "cls": b"1"}), ("k2", {"txt": b"y"})])
    with pytest.raises(ExampleError, match=r"a\.tar:k2.*missing key 'cls'"):
        sds.load_dataset("webdataset", data_files=str(tmp_path / "a.tar"), split="train")


def test_webdataset_truncated_tar_names_the_byte_offset(tmp_path):
    _shard(tmp_path / "a.tar", [(f"k{i}", {"txt": b"x" * 600}) for i in range(4)])
    data = (tmp_path / "a.tar").read_bytes()
    (tmp_path / "a.tar").write_bytes(data[:1800])
    with pytest.raises(LoaderError, match=r"a\.tar: truncated or corrupt tar at byte 1536"):
        sds.load_dataset("webdataset", data_files=str(tmp_path / "a.tar"), split="train")


def test_webdataset_matches_the_webdataset_package_grouping(tmp_path):
    """Keys as WebDataset splits them: the first dot of the base name."""
    _shard(tmp_path / "a.tar", [("dir/x.y", {"seg.png": _png(_digits(1)[0][0]), "txt": b"t"})])
    ds = sds.load_dataset("webdataset", data_files=str(tmp_path / "a.tar"), split="train")
    # "dir/x.y.seg.png" -> key "dir/x", extension "y.seg.png"; "dir/x.y.txt" -> key "dir/x", "y.txt"
    assert ds["__key__"] == ["dir/x"] and sorted(ds.column_names) == sorted(["__key__", "__url__", "y.seg.png",
                                                                           "y.txt"])
    assert ds.features["y.seg.png"] == sds.Image() and ds["y.txt"] == ["t"]


def _write_rows(loader: str, path: Path, values: list[int]) -> None:
    """One input file of `loader` holding rows that carry `values` (read back by _values)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if loader == "csv":
        path.write_text("v\n" + "".join(f"{v}\n" for v in values))
    elif loader == "json":
        path.write_text("".join(json.dumps({"v": v}) + "\n" for v in values))
    elif loader == "text":
        path.write_text("".join(f"{v}\n" for v in values))
    elif loader == "parquet":
        pq.write_table(pa.table({"v": values}), path)
    elif loader == "arrow":
        table = pa.table({"v": values})
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    elif loader == "webdataset":
        _shard(path, [(f"{path.stem}-{i}", {"cls": str(v).encode()}) for i, v in enumerate(values)])
    elif loader == "imagefolder":
        path.mkdir(exist_ok=True)
        for i, v in enumerate(values):
            cv2.imwrite(str(path / f"{i}.png"), np.full((2, 2), v, np.uint8))
    elif loader == "videofolder":
        path.mkdir(exist_ok=True)
        for i, v in enumerate(values):
            _video(path / f"{i}.mp4", 1 + v % 3, v)
    stat = path.stat()  # a new mtime even on filesystems with a coarse clock
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def _values(loader: str, ds) -> list[int]:
    if loader in ("csv", "json", "parquet", "arrow"):
        return ds["v"]
    if loader == "text":
        return [int(t) for t in ds["text"]]
    if loader == "webdataset":
        return ds["cls"]
    if loader == "imagefolder":
        return [int(row["image"][0, 0, 0]) for row in ds]
    return [int(row["video"].size > 0) for row in ds]  # videofolder: one row per file


EXTENSION = {"csv": ".csv", "json": ".jsonl", "text": ".txt", "parquet": ".parquet", "arrow": ".arrow",
             "webdataset": ".tar", "imagefolder": "", "videofolder": ""}


@pytest.mark.parametrize("loader", list(EXTENSION))
def test_every_loader_rebuilds_on_edit_add_and_remove_and_reuses_unchanged(tmp_path, loader):
    root = tmp_path / "inputs"
    root.mkdir()
    media = loader in ("imagefolder", "videofolder")
    first = root / ("a" if media else f"a{EXTENSION[loader]}")
    _write_rows(loader, first, [10, 20])
    kwargs = {"data_dir": str(root)} if media else {"data_files": str(root / f"*{EXTENSION[loader]}")}
    if media:  # files under folders of one depth: one folder "a" at first, then "a" and "b"
        kwargs["drop_labels"] = True

    def load():
        return sds.load_dataset(loader, split="train", **kwargs)

    built = load()
    assert len(built) == 2 and (loader == "videofolder" or _values(loader, built) == [10, 20])
    assert load().cache_files == built.cache_files  # unchanged: reused
    edited = [10, 20, 30]
    if media:  # edit: replace one file's content
        _write_rows(loader, first, [40])
        (first / "1.png").unlink(missing_ok=True)
        (first / "1.mp4").unlink(missing_ok=True)
        assert len(load()) == 1 and (loader == "videofolder" or _values(loader, load()) == [40])
    else:
        _write_rows(loader, first, edited)
        assert _values(loader, load()) == edited
    second = root / ("b" if media else f"b{EXTENSION[loader]}")
    _write_rows(loader, second, [50])
    grown = load()
    assert len(grown) == (2 if media else 4) and (loader == "videofolder" or _values(loader, grown)[-1] == 50)
    if media:
        for child in first.iterdir():
            child.unlink()
        first.rmdir()
    else:
        first.unlink()
    shrunk = load()
    assert len(shrunk) == 1 and (loader == "videofolder" or _values(loader, shrunk) == [50])


def test_webdataset_compressed_shards_and_folder_inference(tmp_path):
    import gzip

    folder = tmp_path / "shards"
    folder.mkdir()
    _shard(tmp_path / "plain.tar", [(f"k{i}", {"txt": f"text {i}".encode(), "cls": str(i).encode()}) for i in range(3)])
    (folder / "shard-0.tar.gz").write_bytes(gzip.compress((tmp_path / "plain.tar").read_bytes()))
    ds = sds.load_dataset(str(folder), split="train")
    assert ds["txt"] == ["text 0", "text 1", "text 2"] and ds["cls"] == [0, 1, 2]
