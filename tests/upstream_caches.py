"""Caches written the way the upstream stable-datasets' `cache.py` writes them (`_metadata.json` and
shards, Lance rows, WebP video frames), for the tests of reading, migrating and limiting them."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pyarrow as pa


def upstream_field(name, dtype, feature):
    return pa.field(name, dtype, metadata={b"stable_datasets.feature": feature.encode()})


SCHEMA = pa.schema([
    upstream_field("image", pa.large_binary(), "Image"), upstream_field("label", pa.int64(), "ClassLabel"),
    upstream_field("caption", pa.string(), "Value"), upstream_field("tokens", pa.list_(pa.int64()), "Sequence"),
    upstream_field("volume", pa.large_binary(), "Array3D")])


def digit_images(n):
    from sklearn.datasets import load_digits

    return np.round(load_digits().images[:n] * (255 / 16)).astype(np.uint8)


def upstream_batch(row, count):
    digits = digit_images(row + count)
    images = [cv2.imencode(".png", digits[row + i])[1].tobytes() for i in range(count)]
    return pa.record_batch([
        pa.array(images, pa.large_binary()), pa.array([(row + i) % 10 for i in range(count)], pa.int64()),
        pa.array([f"digit {row + i}" for i in range(count)]), pa.array([[row + i, 1] for i in range(count)]),
        pa.array([np.full((2, 2, 2), row + i, np.uint8).tobytes() for i in range(count)], pa.large_binary())],
        schema=SCHEMA)


def write_upstream_cache(directory, rows_per_shard, schema=SCHEMA, layout="arrow-shards", compression=None):
    """An upstream arrow-shards cache: one IPC file per entry of `rows_per_shard` (IPC buffers compressed with
    `compression`, as upstream's `write_sharded_arrow_cache(compression=)` writes them)."""
    directory.mkdir(parents=True)
    names, row = [], 0
    options = pa.ipc.IpcWriteOptions(compression=compression) if compression else None
    for shard, count in enumerate(rows_per_shard):
        names.append(f"shard-{shard:05d}.arrow")
        with pa.OSFile(str(directory / names[-1]), "wb") as sink, \
                pa.ipc.new_file(sink, schema, options=options) as writer:
            writer.write_batch(upstream_batch(row, count))
        row += count
    meta = {"cache_format_version": 1, "format": "arrow", "layout": layout, "schema_fingerprint": "0123456789abcdef",
            "num_rows": row, "num_shards": len(names), "shard_row_counts": list(rows_per_shard),
            "shard_filenames": names, "shard_size_target_bytes": None, **({"compression": compression}
                                                                            if compression else {})}
    (directory / "_metadata.json").write_text(json.dumps(meta, indent=2))
    return directory


def write_upstream_lance_cache(directory, num_rows):
    """An upstream lance-rows cache: a Lance dataset at the cache root (`write_lance_cache`)."""
    import lance

    lance.write_dataset(pa.Table.from_batches([upstream_batch(0, num_rows)]), str(directory))
    meta = {"cache_format_version": 1, "format": "lance", "layout": "lance-rows",
            "schema_fingerprint": "0123456789abcdef", "num_rows": num_rows}
    (directory / "_metadata.json").write_text(json.dumps(meta, indent=2))
    return directory


def write_tiny_video(path, frames=5, size=12):
    """upstream's own test video: mp4v, 5 fps, frame i filled with i * 20."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 5.0, (size, size))
    for idx in range(frames):
        writer.write(np.full((size, size, 3), idx * 20, dtype=np.uint8))
    writer.release()
    return path


def write_upstream_frames_cache(directory, videos, quality=65):
    """An upstream lance-video-frames cache as `write_lance_video_frames_cache` writes it: one WebP
    frame per Lance row (video_id, frame_idx, bytes) and a `videos` record per video in the metadata.
    `videos` is a list of (path, metadata) pairs."""
    import lance

    schema = pa.schema([("video_id", pa.int32()), ("frame_idx", pa.int32()), ("bytes", pa.large_binary())])
    batches, records, row = [], [], 0
    for video_id, (path, metadata) in enumerate(videos):
        capture, blobs = cv2.VideoCapture(str(path)), []
        while True:
            ok, bgr = capture.read()
            if not ok:
                break
            blobs.append(cv2.imencode(".webp", bgr, [int(cv2.IMWRITE_WEBP_QUALITY), quality])[1].tobytes())
            height, width = bgr.shape[:2]
        capture.release()
        batches.append(pa.record_batch([pa.array([video_id] * len(blobs), pa.int32()),
                                        pa.array(range(len(blobs)), pa.int32()), pa.array(blobs, pa.large_binary())],
                                       schema=schema))
        records.append({"id": video_id, "key": f"v{video_id}", "path": str(path), "checksum": None, "T": len(blobs),
                        "H": height, "W": width, "start_row": row, "metadata": metadata})
        row += len(blobs)
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, iter(batches)), str(directory), mode="create")
    meta = {"cache_format_version": 1, "format": "lance", "layout": "lance-video-frames",
            "schema_fingerprint": "0123456789abcdef", "num_rows": row, "total_rows": row, "n_videos": len(records),
            "n_skipped": 0, "encoding": "webp", "quality": quality, "resize": None, "video_column": "video",
            "videos": records}
    (directory / "_metadata.json").write_text(json.dumps(meta, indent=2))
    return directory
