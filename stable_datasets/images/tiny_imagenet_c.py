"""Tiny ImageNet-C (Hendrycks & Dietterich, 2019): the 10,000 Tiny ImageNet validation images under 15 corruptions
at 5 severities (750,000 rows in upstream's "all" config), from the official uncompressed tar of JPEGs laid out
`Tiny-ImageNet-C/<corruption>/<severity>/<wnid>/<file>`. The tar is read in place: one pass over its headers
indexes each wanted member's name, offset and size (about 200 bytes a member, some 160 MB for all 750,000;
never the members' data), then each image is read by seeking, in upstream's order. The JPEG bytes are kept as in
the archive."""

from __future__ import annotations

import tarfile
from collections import defaultdict

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image, Value
from stable_datasets.images._cifar_corrupted import CorruptionConfig, corruption_configs
from stable_datasets.images.cifar10_c import _CITATION
from stable_datasets.images.tiny_imagenet import WNIDS

#: upstream's order of the 15 corruptions (the order of the rows of the "all" config)
CORRUPTIONS = ["gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
               "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate",
               "jpeg_compression"]
IMAGES_PER_LEVEL = 10_000
_ROOT = "Tiny-ImageNet-C"
#: Zenodo publishes an md5 only, and no public sha256 or size record exists for this file: the download is not
#: checked
_ARCHIVE = DownloadInfo("https://zenodo.org/records/2536630/files/Tiny-ImageNet-C.tar?download=1",
                        fallbacks=["https://zenodo.org/record/2536630/files/Tiny-ImageNet-C.tar"],
                        filename="Tiny-ImageNet-C.tar")


class TinyImagenetC(CatalogBuilder):
    """Tiny ImageNet-C: one `test` split; configs "all" (default), "<corruption>", "<corruption>_<severity>"."""

    VERSION = Version("1.0.0")
    TASK = "image classification (robustness)"
    BUILDER_CONFIG_CLASS = CorruptionConfig
    BUILDER_CONFIGS = corruption_configs(CORRUPTIONS)
    DEFAULT_CONFIG_NAME = "all"
    SOURCE = DatasetSource(homepage="https://zenodo.org/records/2536630", assets={"test": _ARCHIVE},
                           citation=_CITATION, license="CC BY 4.0")

    @staticmethod
    def _labels() -> list[str]:
        return list(WNIDS)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Tiny ImageNet-C: the Tiny ImageNet validation images under 15 common corruptions at 5 "
                        "severities each; `corruption_name` and `corruption_level` say which.",
            features=Features({"image": Image(), "label": ClassLabel(names=WNIDS),
                               "corruption_name": Value("string"), "corruption_level": Value("int32")}),
            supervised_keys=("image", "label"),
            num_examples={"test": self.config.num_rows(CORRUPTIONS, IMAGES_PER_LEVEL)},
        )

    def _generate_examples(self, data_path, split):
        """Corruptions in upstream's order, severities 1-5, class folders sorted, files sorted in each."""
        selection = self.config.selection(CORRUPTIONS)
        wanted = {(corruption, str(level)) for corruption, levels in selection for level in levels}
        index = _index_images(str(data_path), wanted)
        with open(data_path, "rb") as raw:
            for corruption, levels in selection:
                for level in levels:
                    for wnid, name, offset, size in sorted(index.get((corruption, str(level)), ())):
                        raw.seek(offset)
                        data = raw.read(size)
                        if len(data) != size:
                            raise StableDatasetsError(f"{data_path}: member {corruption}/{level}/{wnid}/{name} "
                                                      f"is cut short ({len(data)} of {size} bytes)")
                        yield f"{corruption}_{level}_{wnid}_{name}", {
                            "image": data, "label": wnid, "corruption_name": corruption, "corruption_level": level}


def _index_images(path: str, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[str, str, int, int]]]:
    """(corruption, severity) -> [(wnid, file, data offset, size)] of the wanted groups, from one pass over the
    tar's headers; an uncompressed tar is required, since members are then read by seeking."""
    index: dict[tuple[str, str], list[tuple[str, str, int, int]]] = defaultdict(list)
    wnids: dict[str, str] = {}  # one string per class, shared by its members' entries
    try:
        archive = tarfile.open(path, "r:")  # noqa: SIM115 (closed by the `with` below, after the error check)
    except tarfile.TarError as exc:
        raise StableDatasetsError(f"{path}: not an uncompressed tar archive ({exc})") from None
    with archive:
        while (member := archive.next()) is not None:
            archive.members.clear()  # keep no TarInfo per member: the index below is all that is needed
            parts = member.name.removeprefix("./").split("/")
            if member.isfile() and len(parts) == 5 and parts[0] == _ROOT and (parts[1], parts[2]) in wanted:
                wnid = wnids.setdefault(parts[3], parts[3])
                index[(parts[1], parts[2])].append((wnid, parts[4], member.offset_data, member.size))
    return index
