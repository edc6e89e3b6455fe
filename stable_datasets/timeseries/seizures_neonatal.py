"""Neonatal EEG seizures (Stevenson et al., 2019): multichannel EEG of 79 term neonates in a NICU (EDF files,
256 Hz), with the seizure annotations of three experts, one per second (annotations_2017.mat). A row per subject,
1 to 79: `series` is the EEG in volts as float32 `[T, C]` (MNE's scale, as upstream reads it; read here with numpy,
no MNE needed), `annotations` the experts' `[3, seconds]` 0/1 marks. The `.mat` file is read whole by scipy (the
format has no streaming reader); each EDF file is memory-mapped, one at a time. One split, `train`."""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import DatasetInfo, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.matlab import load_mat
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import Features, Sequence, Value
from stable_datasets.timeseries._edf import read_edf
from stable_datasets.timeseries._shared import series_feature

SUBJECTS = range(1, 80)


def _zenodo(name: str) -> DownloadInfo:
    # Zenodo publishes md5 digests only: no sha256 or size from a public record
    return DownloadInfo(f"https://zenodo.org/record/2547147/files/{name}?download=1",
                        fallbacks=[f"https://zenodo.org/records/2547147/files/{name}"], filename=name)


class SeizuresNeonatal(CatalogBuilder):
    """Neonatal EEG with expert seizure annotations; `series` in volts, float32 `[T, C]`."""

    VERSION = Version("1.0.0")
    TASK = "EEG seizure detection"
    EXTRA = "formats"
    SOURCE = DatasetSource(
        homepage="https://zenodo.org/records/2547147",
        assets={"annotations": _zenodo("annotations_2017.mat"),
                **{f"eeg{i}": _zenodo(f"eeg{i}.edf") for i in SUBJECTS}},
        citation="""@article{stevenson2019dataset,
  title={A dataset of neonatal EEG recordings with seizure annotations},
  author={Stevenson, Nathan J. and Tapani, Karoliina and Lauronen, Leena and Vanhatalo, Sampsa},
  journal={Scientific Data},
  volume={6},
  year={2019}}""",
        license="CC BY 4.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Neonatal EEG recordings (79 subjects) with per-second seizure annotations by three experts.",
            features=Features({"series": series_feature(), "annotations": Sequence(Sequence(Value("int32"))),
                               "subject_id": Value("int32"), "filename": Value("string")}),
            num_examples={"train": len(SUBJECTS)},
        )

    def _split_generators(self, dl_manager):
        files = dl_manager.download(self._source().remote_files())
        return [SplitGenerator("train", {"annotations_path": files["annotations"],
                                         "eeg_paths": {i: files[f"eeg{i}"] for i in SUBJECTS}})]

    def _generate_examples(self, annotations_path, eeg_paths):
        mat = load_mat(annotations_path, ["annotat_new"])
        if "annotat_new" not in mat:
            raise StableDatasetsError(f"{annotations_path} holds no 'annotat_new' variable")
        annotations = mat["annotat_new"][0]
        if len(annotations) < len(SUBJECTS):
            raise StableDatasetsError(f"{annotations_path}: annotat_new has {len(annotations)} subjects, "
                                      f"expected {len(SUBJECTS)}")
        for subject in SUBJECTS:
            series, _, _ = read_edf(eeg_paths[subject])
            marks = np.asarray(annotations[subject - 1]).astype(np.int32)
            if marks.ndim == 1:
                marks = marks[:, None]
            yield subject, {"series": series, "annotations": marks.tolist(), "subject_id": subject,
                            "filename": f"eeg{subject}.edf"}
