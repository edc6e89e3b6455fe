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
