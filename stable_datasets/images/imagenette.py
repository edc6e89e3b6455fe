"""Imagenette (full-size, v2): 10 easily classified ImageNet classes, 9,469 train / 3,925 validation JPEGs, read
from fast.ai's `imagenette2.tgz` member by member (a streaming read of the gzip, never extracted). The JPEG bytes
are kept as in the archive (upstream decodes and re-encodes them as JPEG)."""

from __future__ import annotations

import tarfile

from stable_datasets.builder import DatasetInfo, Split, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.features import ClassLabel, Features, Image

#: upstream's ImageNet-10 wnids, sorted (their index is the label)
IN10_CLASSES = ["n01440764", "n02102040", "n02979186", "n03000684", "n03028079", "n03394916", "n03417042",
                "n03425413", "n03445777", "n03888257"]
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
#: sha256 and size from the newest public record, Hugging Face's frgfm/imagenette dataset_infos.json (2022); TFDS's
#: older url_checksums/imagenette.txt has 1556914727 bytes, sha256 de32de18...: the file was replaced since
_ARCHIVE = DownloadInfo("https://s3.amazonaws.com/fast-ai-imageclas/imagenette2.tgz",
                        checksum="sha256:6cbfac238434d89fe99e651496f0812ebc7a10fa62bd42d6874042bf01de4efd",
                        size=1557161267)


class Imagenette(CatalogBuilder):
    """Imagenette (Howard, 2019): `train` and `validation` (the archive's `val` folder)."""

    VERSION = Version("3.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://github.com/fastai/imagenette",
        assets={"archive": _ARCHIVE},
        citation="""@misc{howard2019imagenette,
  author={Jeremy Howard},
  title={Imagenette: A smaller subset of 10 easily classified classes from ImageNet},
  year={2019},
  url={https://github.com/fastai/imagenette}}""",
        license="Apache-2.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Imagenette: a subset of 10 easily classified classes of ImageNet (tench, English "
                        "springer, cassette player, chain saw, church, French horn, garbage truck, gas pump, golf "
                        "ball, parachute), full-size JPEGs kept as in the archive.",
            features=Features({"image": Image(), "label": ClassLabel(names=IN10_CLASSES)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 9_469, "validation": 3_925},
        )

    def _split_generators(self, dl_manager):
        archive = dl_manager.download(self._source().remote_files()["archive"])
        return [SplitGenerator(Split.TRAIN, {"data_path": archive, "split": "train"}),
                SplitGenerator(Split.VALIDATION, {"data_path": archive, "split": "val"})]

    def _generate_examples(self, data_path, split):
        """Members `imagenette2/<split>/<wnid>/<file>` in the archive's order, as upstream reads them."""
        labels = {wnid: index for index, wnid in enumerate(IN10_CLASSES)}
        with tarfile.open(data_path, "r|*") as archive:
            for member in archive:
                parts = member.name.split("/")
                if not member.isfile() or not member.name.lower().endswith(_IMAGE_SUFFIXES) or len(parts) < 4 \
                        or parts[0] != "imagenette2" or parts[1] != split or parts[2] not in labels:
                    continue
                fh = archive.extractfile(member)
                if fh is not None:
                    yield member.name, {"image": fh.read(), "label": labels[parts[2]]}
