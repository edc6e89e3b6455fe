"""Cars3D: 183 car models rendered at 24 azimuths x 4 elevations, 128x128 RGB (17,568 images), from the archive of
Reed et al.'s NIPS 2015 analogy data (`data/cars/*.mat`, each holding `im` (128, 128, 3, 24, 4)).

The archive also holds other datasets; only the cars' members are read, in place (upstream extracts the whole
archive to disk). The cars are numbered in the sorted order of their files' names, as upstream's, and read in that
order; each `.mat` is read whole by scipy (the format has no streaming reader), one car at a time. Rows run over
elevations, then azimuths, as upstream's."""

from __future__ import annotations

import io
import tarfile

import numpy as np

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.matlab import load_mat
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Features, Image, Sequence, Value

#: no public record gives this archive's sha256 or size: downloaded unchecked (the row count is checked)
_ARCHIVE = DownloadInfo("http://www.scottreed.info/files/nips2015-analogy-data.tar.gz")
_CARS = "data/cars/"


class Cars3D(CatalogBuilder):
    """Cars3D (Reed et al., 2015): `label` is [car_type, elevation, azimuth], each also its own column."""

    VERSION = Version("1.0.0")
    TASK = "disentangled representation learning"
    EXTRA = "formats"
    SOURCE = DatasetSource(
        homepage="https://github.com/google-research/disentanglement_lib/tree/master",
        assets={"train": _ARCHIVE},
        citation="""@inproceedings{reed2015deep,
  title={Deep Visual Analogy-Making},
  author={Reed, Scott E and Zhang, Yi and Zhang, Yuting and Lee, Honglak},
  booktitle={Advances in Neural Information Processing Systems},
  pages={1252--1260},
  year={2015}}
@inproceedings{locatello2019challenging,
  title={Challenging Common Assumptions in the Unsupervised Learning of Disentangled Representations},
  author={Locatello, Francesco and Bauer, Stefan and Lucic, Mario and Raetsch, Gunnar and Gelly, Sylvain and
    Sch{\"o}lkopf, Bernhard and Bachem, Olivier},
  booktitle={International Conference on Machine Learning},
  pages={4114--4124},
  year={2019}}""",
        license="Apache-2.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Cars3D: 183 car types x 24 azimuth angles x 4 elevation angles, 128x128 RGB renders.",
            features=Features({"image": Image(), "car_type": Value("int32"), "elevation": Value("int32"),
                               "azimuth": Value("int32"), "label": Sequence(Value("int32"))}),
            supervised_keys=("image", "label"),
            num_examples={"train": 183 * 24 * 4},
        )

    def _generate_examples(self, data_path, split):
        index = 0
        with tarfile.open(data_path) as archive:
            cars = sorted((m for m in archive.getmembers()
                           if m.isfile() and m.name.startswith(_CARS) and m.name.endswith(".mat")),
                          key=lambda m: m.name.rsplit("/", 1)[-1])
            if not cars:
                raise StableDatasetsError(f"{data_path} holds no {_CARS}*.mat members")
            for car, member in enumerate(cars):
                fh = archive.extractfile(member)
                assert fh is not None  # a regular file always has a reader
                images = load_mat(io.BytesIO(fh.read()), ["im"]).get("im")
                if images is None or images.ndim != 5 or images.shape[:3] != (128, 128, 3):
                    shape = None if images is None else images.shape
                    raise StableDatasetsError(f"{data_path}:{member.name}: 'im' has shape {shape}, expected "
                                              "(128, 128, 3, azimuths, elevations)")
                for elevation in range(images.shape[4]):
                    for azimuth in range(images.shape[3]):
                        image = np.ascontiguousarray(images[:, :, :, azimuth, elevation], dtype=np.uint8)
                        yield index, {"image": image, "car_type": car, "elevation": elevation, "azimuth": azimuth,
                                      "label": [car, elevation, azimuth]}
                        index += 1
