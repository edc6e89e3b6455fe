"""The univariate datasets of the UEA/UCR time-series archive (timeseriesclassification.com) that the catalog ships:
one zip per dataset holding `<Name>_TRAIN.arff` and `<Name>_TEST.arff`, each row a series of numeric values and a
class. Rows are yielded in file order, `series` as float32 `[length, 1]`; class ids follow the class attribute's
declared values (or the sorted class strings when it declares none), as upstream."""

from __future__ import annotations

import zipfile
from typing import ClassVar

from stable_datasets.catalog import CatalogBuilder
from stable_datasets.catalog.formats.arff import iter_arff
from stable_datasets.errors import StableDatasetsError

UEA_CITATION = """@article{dau2019ucr,
  title={The UCR time series archive},
  author={Dau, Hoang Anh and Bagnall, Anthony and Kamgar, Kaveh and Yeh, Chin-Chia Michael and Zhu, Yan and
          Gharghabi, Shaghayegh and Ratanamahatana, Chotirat Ann and Keogh, Eamonn},
  journal={IEEE/CAA Journal of Automatica Sinica},
  year={2019}}"""


def uea_url(name: str) -> str:
    return f"http://www.timeseriesclassification.com/Downloads/{name}.zip"


def find_member(archive: zipfile.ZipFile, suffix: str) -> str:
    """The member whose name ends with `suffix` (any case): the archive's folder layout varies between datasets."""
    for name in archive.namelist():
        if name.lower().endswith(suffix.lower()):
            return name
    raise StableDatasetsError(f"{archive.filename} has no member ending with {suffix}")


class UEAArchiveBuilder(CatalogBuilder):
    """A UEA/UCR archive dataset (`UEA_NAME`), read from its ARFF files unless a subclass reads another format."""

    UEA_NAME: ClassVar[str]
    TASK = "time series classification"

    def _generate_examples(self, data_path, split):
        member_suffix = f"{self.UEA_NAME}_{split.upper()}.arff"
        with zipfile.ZipFile(data_path) as archive:
            member = find_member(archive, member_suffix)
            where = f"{data_path}:{member}"
            with archive.open(member) as fh:
                header, blocks = iter_arff(fh, where=where)
                declared = header.class_values
                if declared is None:  # numbered over the sorted class strings: read them first
                    declared = sorted({label for _, labels in blocks for label in labels})
            room = getattr(self.info.features.get("label"), "num_classes", None)
            if room is not None and len(declared) > room:
                raise StableDatasetsError(f"{where}: {len(declared)} classes ({', '.join(map(repr, declared))}) do "
                                          f"not fit {type(self).__name__}'s {room}")
            ids = {name: i for i, name in enumerate(declared)}
            with archive.open(member) as fh:
                index = 0
                for values, labels in iter_arff(fh, where=where)[1]:
                    for row, label in zip(values, labels):
                        if label not in ids:
                            raise StableDatasetsError(f"{where}: class {label!r} of row {index} is not declared")
                        yield index, {"series": row[:, None], "label": ids[label]}
                        index += 1
