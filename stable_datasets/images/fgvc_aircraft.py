"""FGVC-Aircraft (2013b): 10,000 photos of aircraft, 3,334 train / 3,333 validation / 3,333 test, labelled at
three levels, one config each: `variant` (100 classes, the default), `family` (70) and `manufacturer` (30).

The archive lists each split's image ids with their label in `data/images_<level>_<split>.txt` ("<id> <label>",
the split spelled train / val / test). Every photo carries a 20-pixel copyright banner at its bottom, which
upstream crops off; so does this builder, and since cropping needs the pixels, the cropped image is stored as a
lossless PNG (the only images of this module not kept as published). Rows come in the archive's stored order.
"""

from __future__ import annotations

from stable_datasets.builder import BuilderConfig, DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import lines_of, read_member, stream_members
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image
from stable_datasets.features.image import decode_image_bytes

#: the archive Oxford serves now, as pinned by several public download scripts of 2026; TFDS's older record
#: (url_checksums/fgvc.txt: 2,770,575,360 bytes, sha256 d5f68b1b...) is of an earlier upload of the same name
_ARCHIVE = DownloadInfo("https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/archives/fgvc-aircraft-2013b.tar.gz",
                        checksum="sha256:e4e323d410e29f0370c81eabdcbb0e2b813acea1de22891b70b58ff41bfc9834",
                        size=2753340328)
_DATA = "fgvc-aircraft-2013b/data/"
#: rows of pixels of the copyright banner at the bottom of every photo
BANNER_HEIGHT = 20
#: split -> its spelling in the list files' names
_SPLIT_FILES = {"train": "train", "validation": "val", "test": "test"}

VARIANTS = [
    "707-320", "727-200", "737-200", "737-300", "737-400", "737-500", "737-600", "737-700", "737-800", "737-900",
    "747-100", "747-200", "747-300", "747-400", "757-200", "757-300", "767-200", "767-300", "767-400", "777-200",
    "777-300", "A300B4", "A310", "A318", "A319", "A320", "A321", "A330-200", "A330-300", "A340-200", "A340-300",
    "A340-500", "A340-600", "A380", "ATR-42", "ATR-72", "An-12", "BAE 146-200", "BAE 146-300", "BAE-125",
    "Beechcraft 1900", "Boeing 717", "C-130", "C-47", "CRJ-200", "CRJ-700", "CRJ-900", "Cessna 172", "Cessna 208",
    "Cessna 525", "Cessna 560", "Challenger 600", "DC-10", "DC-3", "DC-6", "DC-8", "DC-9-30", "DH-82", "DHC-1", "DHC-6",
    "DHC-8-100", "DHC-8-300", "DR-400", "Dornier 328", "E-170", "E-190", "E-195", "EMB-120", "ERJ 135", "ERJ 145",
    "Embraer Legacy 600", "Eurofighter Typhoon", "F-16A/B", "F/A-18", "Falcon 2000", "Falcon 900", "Fokker 100",
    "Fokker 50", "Fokker 70", "Global Express", "Gulfstream IV", "Gulfstream V", "Hawk T1", "Il-76", "L-1011", "MD-11",
    "MD-80", "MD-87", "MD-90", "Metroliner", "Model B200", "PA-28", "SR-20", "Saab 2000", "Saab 340", "Spitfire",
    "Tornado", "Tu-134", "Tu-154", "Yak-42",
]

FAMILIES = [
    "A300", "A310", "A320", "A330", "A340", "A380", "ATR-42", "ATR-72", "An-12", "BAE 146", "BAE-125",
    "Beechcraft 1900", "Boeing 707", "Boeing 717", "Boeing 727", "Boeing 737", "Boeing 747", "Boeing 757", "Boeing 767",
    "Boeing 777", "C-130", "C-47", "CRJ-200", "CRJ-700", "Cessna 172", "Cessna 208", "Cessna Citation",
    "Challenger 600", "DC-10", "DC-3", "DC-6", "DC-8", "DC-9", "DH-82", "DHC-1", "DHC-6", "DR-400", "Dash 8",
    "Dornier 328", "EMB-120", "Embraer E-Jet", "Embraer ERJ 145", "Embraer Legacy 600", "Eurofighter Typhoon", "F-16",
    "F/A-18", "Falcon 2000", "Falcon 900", "Fokker 100", "Fokker 50", "Fokker 70", "Global Express", "Gulfstream",
    "Hawk T1", "Il-76", "King Air", "L-1011", "MD-11", "MD-80", "MD-90", "Metroliner", "PA-28", "SR-20", "Saab 2000",
    "Saab 340", "Spitfire", "Tornado", "Tu-134", "Tu-154", "Yak-42",
]

MANUFACTURERS = [
    "ATR", "Airbus", "Antonov", "Beechcraft", "Boeing", "Bombardier Aerospace", "British Aerospace", "Canadair",
    "Cessna", "Cirrus Aircraft", "Dassault Aviation", "Dornier", "Douglas Aircraft Company", "Embraer", "Eurofighter",
    "Fairchild", "Fokker", "Gulfstream Aerospace", "Ilyushin", "Lockheed Corporation", "Lockheed Martin",
    "McDonnell Douglas", "Panavia", "Piper", "Robin", "Saab", "Supermarine", "Tupolev", "Yakovlev", "de Havilland",
]

_LEVELS = {"variant": VARIANTS, "family": FAMILIES, "manufacturer": MANUFACTURERS}


class FGVCAircraft(CatalogBuilder):
    """Fine-Grained Visual Classification of Aircraft (Maji et al., 2013), at the config's level of the hierarchy
    (variant < family < manufacturer)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    BUILDER_CONFIGS = [
        BuilderConfig(name="variant", description="100 aircraft model variants (finest granularity)"),
        BuilderConfig(name="family", description="70 aircraft families (medium granularity)"),
        BuilderConfig(name="manufacturer", description="30 aircraft manufacturers (coarsest granularity)"),
    ]
    DEFAULT_CONFIG_NAME = "variant"
    SOURCE = DatasetSource(
        homepage="https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/",
        assets={split: _ARCHIVE for split in _SPLIT_FILES},
        citation="""@techreport{maji13fine-grained,
  title={Fine-Grained Visual Classification of Aircraft},
  author={S. Maji and J. Kannala and E. Rahtu and M. Blaschko and A. Vedaldi},
  year={2013},
  archivePrefix={arXiv},
  eprint={1306.5151},
  primaryClass="cs.CV"}""",
        license="Unknown",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Fine-Grained Visual Classification of Aircraft (FGVC-Aircraft): 10,000 aircraft photos in "
                        f"train (3,334), validation (3,333) and test (3,333) splits, labelled by {self.config.name} "
                        f"({self.config.description}). The 20-pixel copyright banner at the bottom of each photo is "
                        "cropped off and the crop stored as lossless PNG.",
            features=Features({"image": Image(), "label": ClassLabel(names=_LEVELS[self.config.name])}),
            supervised_keys=("image", "label"),
            num_examples={"train": 3_334, "validation": 3_333, "test": 3_333},
        )

    def _generate_examples(self, data_path, split):
        list_name = f"{_DATA}images_{self.config.name}_{_SPLIT_FILES[split]}.txt"
        classes = {name: index for index, name in enumerate(_LEVELS[self.config.name])}
        labels: dict[str, int] = {}
        for number, line in enumerate(lines_of(read_member(data_path, list_name)), 1):
            image_id, _, name = line.partition(" ")
            if name not in classes:
                raise StableDatasetsError(f"{data_path}:{list_name} line {number}: unknown {self.config.name} "
                                          f"{name!r}")
            labels[image_id] = classes[name]

        def listed(member: str) -> bool:
            return member.startswith(f"{_DATA}images/") and member.endswith(".jpg") and _stem(member) in labels

        for name, data in stream_members(data_path, listed):
            pixels = decode_image_bytes(data)
            if pixels is None or pixels.shape[0] <= BANNER_HEIGHT:
                raise StableDatasetsError(f"{data_path}:{name} is not an image taller than its {BANNER_HEIGHT}-pixel "
                                          "banner")
            yield _stem(name), {"image": pixels[:-BANNER_HEIGHT], "label": labels[_stem(name)]}


def _stem(member: str) -> str:
    """"0034309" for ".../images/0034309.jpg"."""
    return member.rsplit("/", 1)[-1].removesuffix(".jpg")
