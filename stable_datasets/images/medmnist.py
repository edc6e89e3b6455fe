"""MedMNIST v2: 12 2D (28x28) and 6 3D (28x28x28) biomedical image datasets, one config each, from the official
28-pixel `.npz` files on Zenodo (one file a config, holding `<split>_images` and `<split>_labels` of the splits
train, val and test). The members are read in place from the `.npz`, a bounded block of rows at a time, never
unpickled. 2D images are stored lossless (grayscale ones stay one channel); 3D volumes as uint8 arrays."""

from __future__ import annotations

from stable_datasets.builder import BuilderConfig, DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.npz import iter_npz_blocks
from stable_datasets.features import Array3D, ClassLabel, Features, Image, Sequence, Value

#: config -> (classes, channels, train, val, test rows, license), from MedMNIST's own medmnist/info.py
#: (MedMNIST/MedMNIST, INFO[...]["n_samples"], "n_channels", "license")
CONFIGS = {
    "pathmnist": (9, 3, 89_996, 10_004, 7_180, "CC BY 4.0"),
    "chestmnist": (14, 1, 78_468, 11_219, 22_433, "CC BY 4.0"),
    "dermamnist": (7, 3, 7_007, 1_003, 2_005, "CC BY-NC 4.0"),
    "octmnist": (4, 1, 97_477, 10_832, 1_000, "CC BY 4.0"),
    "pneumoniamnist": (2, 1, 4_708, 524, 624, "CC BY 4.0"),
    "retinamnist": (5, 3, 1_080, 120, 400, "CC BY 4.0"),
    "breastmnist": (2, 1, 546, 78, 156, "CC BY 4.0"),
    "bloodmnist": (8, 3, 11_959, 1_712, 3_421, "CC BY 4.0"),
    "tissuemnist": (8, 1, 165_466, 23_640, 47_280, "CC BY 4.0"),
    "organamnist": (11, 1, 34_561, 6_491, 17_778, "CC BY 4.0"),
    "organcmnist": (11, 1, 12_975, 2_392, 8_216, "CC BY 4.0"),
    "organsmnist": (11, 1, 13_932, 2_452, 8_827, "CC BY 4.0"),
    "organmnist3d": (11, 1, 971, 161, 610, "CC BY 4.0"),
    "nodulemnist3d": (2, 1, 1_158, 165, 310, "CC BY 4.0"),
    "adrenalmnist3d": (2, 1, 1_188, 98, 298, "CC BY 4.0"),
    "fracturemnist3d": (3, 1, 1_027, 103, 240, "CC BY 4.0"),
    "vesselmnist3d": (2, 1, 1_335, 191, 382, "CC BY 4.0"),
    "synapsemnist3d": (2, 1, 1_230, 177, 352, "CC BY 4.0"),
}
#: the one multi-label config: its label is the 14 findings' 0/1 flags
MULTI_LABEL = {"chestmnist"}
#: the file's split names -> ours ("val" is the validation split)
_SPLITS = {"train": "train", "val": "validation", "test": "test"}


class MedMNIST(CatalogBuilder):
    """MedMNIST v2 (Yang et al., 2023); `config_name` picks the dataset (default "pathmnist", upstream's first).
    MedMNIST publishes MD5s only, no sha256: the files are downloaded unchecked, the row counts are checked."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    BUILDER_CONFIGS = [BuilderConfig(name=name, version=Version("1.0.0"),
                                     description=f"MedMNIST {name} ({'3D' if name.endswith('3d') else '2D'})")
                       for name in CONFIGS]
    DEFAULT_CONFIG_NAME = "pathmnist"

    def _source(self) -> DatasetSource:
        url = f"https://zenodo.org/records/10519652/files/{self.config.name}.npz?download=1"
        return DatasetSource(
            homepage="https://medmnist.com/",
            assets={"archive": DownloadInfo(url, filename=f"{self.config.name}.npz")},
            citation="""@article{medmnistv2,
  title={MedMNIST v2-A large-scale lightweight benchmark for 2D and 3D biomedical image classification},
  author={Yang, Jiancheng and Shi, Rui and Wei, Donglai and Liu, Zequan and Zhao, Lin
    and Ke, Bilian and Pfister, Hanspeter and Ni, Bingbing},
  journal={Scientific Data},
  volume={10},
  number={1},
  pages={41},
  year={2023},
  publisher={Nature Publishing Group UK London}}""",
            license=CONFIGS[self.config.name][5],
        )

    def _info(self) -> DatasetInfo:
        name = self.config.name
        classes, channels, train, val, test, _ = CONFIGS[name]
        if name.endswith("3d"):
            image = Array3D(shape=(28, 28, 28), dtype="uint8")
        else:
            image = Image(mode="L") if channels == 1 else Image()
        label = Sequence(Value("int8")) if name in MULTI_LABEL else ClassLabel(num_classes=classes)
        return DatasetInfo(
            description=f"MedMNIST {name}: {'28x28x28 volumes' if name.endswith('3d') else '28x28 images'}, "
                        f"{classes} {'findings (multi-label)' if name in MULTI_LABEL else 'classes'}.",
            features=Features({"image": image, "label": label}),
            supervised_keys=("image", "label"),
            num_examples={"train": train, "validation": val, "test": test},
        )

    def _split_generators(self, dl_manager):
        path = dl_manager.download(self._source().remote_files()["archive"])
        return [SplitGenerator(ours, {"data_path": path, "split": theirs}) for theirs, ours in _SPLITS.items()]

    def _generate_examples(self, data_path, split):
        multi_label = self.config.name in MULTI_LABEL
        index = 0
        for images, labels in iter_npz_blocks(data_path, [f"{split}_images", f"{split}_labels"]):
            labels = labels.reshape(len(labels), -1)  # (N, 1) classes or (N, 14) flags
            values = labels.tolist() if multi_label else labels[:, 0].tolist()
            for image, label in zip(images, values):
                yield index, {"image": image, "label": label}
                index += 1
