"""What CIFAR-10-C and CIFAR-100-C share (Hendrycks & Dietterich, 2019), and the configs TinyImageNet-C shares
with them. The CIFAR ones are an uncompressed tar holding `labels.npy` and one `<corruption>.npy` per corruption,
each (5 x N, 32, 32, 3) uint8 with the five severities one after the other. Arrays are read from the tar in place,
a block of rows at a time (catalog.formats.npy), never unpickled.

Configs: "all" (upstream's rows: every corruption in upstream's order, severities 1 to 5 within each), one per
corruption ("fog": its five severities) and one per corruption and severity ("fog_3", TFDS's naming)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stable_datasets.builder import BuilderConfig
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.npy import iter_npy_blocks, read_npy, read_npy_header
from stable_datasets.errors import StableDatasetsError

#: upstream's order of the 19 corruptions (the order of the rows of the "all" config)
CORRUPTIONS = [
    "zoom_blur", "speckle_noise", "spatter", "snow", "shot_noise", "saturate", "pixelate", "motion_blur",
    "jpeg_compression", "impulse_noise", "glass_blur", "gaussian_noise", "gaussian_blur", "frost", "fog",
    "elastic_transform", "defocus_blur", "contrast", "brightness",
]
LEVELS = (1, 2, 3, 4, 5)
#: test images per severity in the official files
IMAGES_PER_LEVEL = 10_000


@dataclass
class CorruptionConfig(BuilderConfig):
    """`corruption` "" means every corruption of the dataset; `level` 0 means every severity."""

    corruption: str = ""
    level: int = 0

    def selection(self, corruptions: list[str]) -> list[tuple[str, tuple[int, ...]]]:
        """(corruption, severities) in the order the rows come, `corruptions` being the dataset's, in order."""
        levels = LEVELS if self.level == 0 else (self.level,)
        return [(c, levels) for c in ([self.corruption] if self.corruption else corruptions)]

    def num_rows(self, corruptions: list[str], images_per_level: int) -> int:
        return sum(len(levels) for _, levels in self.selection(corruptions)) * images_per_level


def corruption_configs(corruptions: list[str]) -> list[CorruptionConfig]:
    """"all", then one config per corruption, then one per corruption and severity."""
    configs = [CorruptionConfig(name="all", description="every corruption at every severity (upstream's rows)")]
    configs += [CorruptionConfig(name=c, corruption=c, description=f"{c} at severities 1-5") for c in corruptions]
    configs += [CorruptionConfig(name=f"{c}_{level}", corruption=c, level=level,
                                 description=f"{c} at severity {level}") for c in corruptions for level in LEVELS]
    return configs


def corrupted_rows(archive: str, config: CorruptionConfig) -> Iterator[tuple[int, dict[str, Any]]]:
    """(key, row) for the config's corruptions and severities; `label` is the row's entry of labels.npy (which
    repeats the test labels once per severity; a single copy of them is read the same way)."""
    selection = config.selection(CORRUPTIONS)
    names = ["labels.npy"] + [f"{corruption}.npy" for corruption, _ in selection]
    members = members_in_order(archive, names)
    _, labels_fh = next(members)
    labels = read_npy(labels_fh, f"{archive}:labels.npy").reshape(-1).tolist()
    index = 0
    for (name, fh), (corruption, levels) in zip(members, selection):
        where = f"{archive}:{name}"
        rows = read_npy_header(fh, where).shape[0]
        if rows % len(LEVELS):
            raise StableDatasetsError(f"{where}: {rows} rows do not split into {len(LEVELS)} severities")
        per_level = rows // len(LEVELS)
        for level in levels:
            fh.seek(0)
            position = (level - 1) * per_level
            for block in iter_npy_blocks(fh, where, position, position + per_level):
                for image in block:
                    yield index, {"image": image, "label": labels[position % len(labels)],
                                  "corruption_name": corruption, "corruption_level": level}
                    index += 1
                    position += 1
