"""`make demo`: build the real `digits` dataset into a cache, load it, and feed a DataLoader."""

from __future__ import annotations

import time

import stable_datasets as sds


def main() -> None:
    print(f"stable-datasets {sds.__version__}; builders available: {', '.join(sds.list_builders())}")

    started = time.perf_counter()
    ds = sds.load_dataset("digits", split="train")
    print(f"\nload_dataset('digits', split='train'): {len(ds)} rows in {time.perf_counter() - started:.2f}s")
    started = time.perf_counter()
    ds = sds.load_dataset("digits", split="train")
    print(f"reopened from the cache in {(time.perf_counter() - started) * 1000:.1f} ms")
    print(f"cache: {ds.cache_dirs[0]}")
    print(f"features: {ds.features}")

    names = ds.features["label"].names
    print("\nthree decoded samples (image as ASCII art, label):")
    shades = " .:-=+*#%@"
    for index in (0, 1, 2):
        row = ds[index]
        image = row["image"][:, :, 0]
        print(f"  ds[{index}]: image {row['image'].shape} {row['image'].dtype}, label {names[row['label']]}")
        for line in image:
            print("    " + "".join(shades[int(v) * (len(shades) - 1) // 255] * 2 for v in line))

    dd = sds.load_dataset("digits")
    print(f"\nall splits: {dd.num_rows}")
    small = sds.load_dataset("digits", split="train[:10%]+test")
    print(f"'train[:10%]+test': {len(small)} rows")

    lance_ds = sds.load_dataset("digits", split="train", storage_format="lance")
    rows = lance_ds.__getitems__([3, 1, 4])
    print(f"\nthe same split as a Lance cache: {len(lance_ds)} rows, __getitems__([3, 1, 4]) labels "
          f"{[r['label'] for r in rows]} (Arrow: {ds[[3, 1, 4]]['label']})")

    videos = sds.load_dataset("moving_digits", name="frames", split="train", train_videos=16, test_videos=4)
    windows = videos.with_frame_windows(window_length=8, hop=4)
    record = videos.cache_metadata[0].extra["videos"][0]
    batch = windows.__getitems__([0, 5, 9])
    coordinates = [(w["video_index"], w["start_frame"]) for w in batch]
    print(f"moving_digits as WebP frames in Lance: {len(videos)} windows of 8 frames from "
          f"{videos.cache_metadata[0].extra['num_videos']} videos ({record['frames']} frames of "
          f"{record['height']}x{record['width']} at {record['fps']:g} fps each); {len(windows)} windows with hop=4; "
          f"a batch of 3: {[tuple(w['video'].shape) for w in batch]}, (video, start frame) {coordinates}")

    try:
        import torch
    except ImportError:
        print("\n(torch is not installed: skipping the DataLoader part)")
        return
    loader = torch.utils.data.DataLoader(ds.with_format("torch"), batch_size=64, shuffle=True, num_workers=2)
    batch = next(iter(loader))
    print(f"\nDataLoader(batch_size=64, num_workers=2) batch: image {tuple(batch['image'].shape)} "
          f"{batch['image'].dtype}, label {tuple(batch['label'].shape)} {batch['label'].dtype}")


if __name__ == "__main__":
    main()
