"""VocalSet (Wilkins et al., 2018): 20 professional singers (9 female, 11 male) singing vowels in 17 techniques,
44.1 kHz WAV, from the official VocalSet11.zip. Like upstream, the rows are the files whose name ends in a vowel
(`..._a.wav` ... `..._u.wav`), outside the excerpts, in sorted member order; `singer` is the folder under the root
(female1 ... male11) and `gender` its letters. One split, `train`."""

from __future__ import annotations

import zipfile

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.audio import read_series
from stable_datasets.features import Features, Value
from stable_datasets.timeseries._shared import series_feature

_VOWELS = frozenset("aeiou")


class VocalSet(CatalogBuilder):
    """VocalSet; `series` is the samples as float32 `[T, C]` on the file's integer scale."""

    VERSION = Version("1.0.0")
    TASK = "singing voice (singer, technique, vowel)"
    EXTRA = "audio"
    SOURCE = DatasetSource(
        homepage="https://zenodo.org/records/1442513",
        # Zenodo publishes md5 digests only: no sha256 or size from a public record
        assets={"train": DownloadInfo("https://zenodo.org/record/1442513/files/VocalSet11.zip?download=1",
                                      fallbacks=["https://zenodo.org/records/1442513/files/VocalSet11.zip"],
                                      filename="VocalSet11.zip")},
        citation="""@inproceedings{wilkins2018vocalset,
  title={VocalSet: A Singing Voice Dataset},
  author={Wilkins, Julia and Seetharaman, Prem and Wahl, Alison and Pardo, Bryan},
  booktitle={International Society for Music Information Retrieval Conference (ISMIR)},
  year={2018}}""",
        license="CC BY 4.0",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="VocalSet: singing voice recordings with singer, gender and vowel.",
            features=Features({"series": series_feature(), "singer": Value("string"), "gender": Value("string"),
                               "vowel": Value("string"), "relative_path": Value("string"),
                               "filename": Value("string")}),
        )

    def _generate_examples(self, data_path, split):
        with zipfile.ZipFile(data_path) as archive:
            for name in sorted(archive.namelist()):
                if not name.lower().endswith(".wav") or "excerpts" in name or name.startswith("_"):
                    continue
                parts = name.split("/")
                if name[-5] not in _VOWELS or len(parts) < 3:
                    continue
                singer = parts[1]
                yield name, {"series": read_series(archive.read(name), name=f"{data_path}:{name}"),
                             "singer": singer, "gender": "".join(ch for ch in singer if ch.isalpha()),
                             "vowel": name[-5], "relative_path": name, "filename": parts[-1]}
