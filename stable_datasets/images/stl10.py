"""STL-10: 96x96 colour images, 10 classes, 5,000 train / 8,000 test labelled and 100,000 unlabeled, from the
official binary archive. Its members (`stl10_binary/<split>_X.bin`: 3x96x96 bytes a record, each plane in MATLAB's
column-major order; `<split>_y.bin`: one byte a label, 1-10) are read in place, a bounded block of records at a
time. The unlabeled split's label is -1, as upstream's. Upstream stores JPEG re-encodes; here the pixels stay as
in the files (lossless PNG)."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.records import iter_records
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

_SIZE = 96
_RECORD = 3 * _SIZE * _SIZE
#: sha256 and size from TFDS's url_checksums/stl10.txt (its URL, on ai.stanford.edu, is the mirror)
_ARCHIVE = DownloadInfo("https://cs.stanford.edu/~acoates/stl10/stl10_binary.tar.gz",
                        ["http://ai.stanford.edu/~acoates/stl10/stl10_binary.tar.gz"],
                        checksum="sha256:f31fd99273a1acb8609c8db427cebb1de3f71de77758cdc0e22956e1289b9866",
                        size=2640397119)
LABELS = ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]
_SPLITS = ("train", "test", "unlabeled")


class STL10(CatalogBuilder):
    """STL-10 (Coates, Lee and Ng, 2011)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://cs.stanford.edu/~acoates/stl10/",
        assets={"archive": _ARCHIVE},
        citation="""@inproceedings{coates2011analysis,
  title={An analysis of single-layer networks in unsupervised feature learning},
  author={Coates, Adam and Lee, Honglak and Ng, Andrew Y},
  booktitle={AISTATS},
  year={2011}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="STL-10: 96x96 colour images in 10 classes (500 train and 800 test images a class) and "
                        "100,000 unlabeled images for unsupervised learning (label -1). Pixels are kept as in the "
                        "official binary files (upstream stores JPEG re-encodes).",
            features=Features({"image": Image(format="bmp"), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 5_000, "test": 8_000, "unlabeled": 100_000},
        )

    def _split_generators(self, dl_manager):
        path = dl_manager.download(self._source().remote_files()["archive"])
        return [SplitGenerator(split, {"data_path": path, "split": split}) for split in _SPLITS]

    def _generate_examples(self, data_path, split):
        images_name = f"{split}_X.bin"
        labels = None
        names = [images_name] if split == "unlabeled" else [f"{split}_y.bin", images_name]
        index = 0
        for name, fh in members_in_order(data_path, names):
            if name != images_name:  # the labels come first: one byte each, small
                labels = np.frombuffer(fh.read(), dtype=np.uint8).astype(np.int64) - 1
                continue
            for block in iter_records(fh, _RECORD, f"{data_path}:{name}"):
                images = block.reshape(-1, 3, _SIZE, _SIZE).transpose(0, 3, 2, 1)  # column-major planes -> HWC
                if labels is not None and index + len(images) > len(labels):
                    raise StableDatasetsError(f"{data_path}: {name} holds more images than the {len(labels)} "
                                              f"labels of {split}_y.bin")
                for image in images:
                    label = -1 if labels is None else int(labels[index])
                    yield index, {"image": np.ascontiguousarray(image), "label": label}
                    index += 1
        if labels is not None and index != len(labels):
            raise StableDatasetsError(f"{data_path}: {images_name} holds {index} images but {split}_y.bin holds "
                                      f"{len(labels)} labels")
