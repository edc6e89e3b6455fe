"""CUB-200-2011 (Caltech-UCSD Birds): 11,788 photos of 200 bird species; 5,994 train / 5,794 test.

Everything is in one archive: `CUB_200_2011/images.txt` ("<id> <class folder>/<file>"), `image_class_labels.txt`
("<id> <class 1-200>") and `train_test_split.txt` ("<id> <1 if training>"). Rows come in `images.txt` order, each
split keeping its own images, the JPEG bytes as stored.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.image_archives import lines_of
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

#: TFDS's record of CUB_200_2011.tgz (url_checksums/caltech_birds2011.txt, where it is fetched from a Google Drive
#: copy of the same 1,150,585,339-byte file)
_ARCHIVE = DownloadInfo("https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1",
                        checksum="sha256:0c685df5597a8b24909f6a7c9db6d11e008733779a671760afef78feb49bf081",
                        size=1150585339, filename="CUB_200_2011.tgz")
_ROOT = "CUB_200_2011/"
_TABLES = ["images.txt", "image_class_labels.txt", "train_test_split.txt"]

LABELS = [
    "Black_footed_Albatross", "Laysan_Albatross", "Sooty_Albatross", "Groove_billed_Ani", "Crested_Auklet",
    "Least_Auklet", "Parakeet_Auklet", "Rhinoceros_Auklet", "Brewer_Blackbird", "Red_winged_Blackbird",
    "Rusty_Blackbird", "Yellow_headed_Blackbird", "Bobolink", "Indigo_Bunting", "Lazuli_Bunting", "Painted_Bunting",
    "Cardinal", "Spotted_Catbird", "Gray_Catbird", "Yellow_breasted_Chat", "Eastern_Towhee", "Chuck_will_Widow",
    "Brandt_Cormorant", "Red_faced_Cormorant", "Pelagic_Cormorant", "Bronzed_Cowbird", "Shiny_Cowbird", "Brown_Creeper",
    "American_Crow", "Fish_Crow", "Black_billed_Cuckoo", "Mangrove_Cuckoo", "Yellow_billed_Cuckoo",
    "Gray_crowned_Rosy_Finch", "Purple_Finch", "Northern_Flicker", "Acadian_Flycatcher", "Great_Crested_Flycatcher",
    "Least_Flycatcher", "Olive_sided_Flycatcher", "Scissor_tailed_Flycatcher", "Vermilion_Flycatcher",
    "Yellow_bellied_Flycatcher", "Frigatebird", "Northern_Fulmar", "Gadwall", "American_Goldfinch",
    "European_Goldfinch", "Boat_tailed_Grackle", "Eared_Grebe", "Horned_Grebe", "Pied_billed_Grebe", "Western_Grebe",
    "Blue_Grosbeak", "Evening_Grosbeak", "Pine_Grosbeak", "Rose_breasted_Grosbeak", "Pigeon_Guillemot",
    "California_Gull", "Glaucous_winged_Gull", "Heermann_Gull", "Herring_Gull", "Ivory_Gull", "Ring_billed_Gull",
    "Slaty_backed_Gull", "Western_Gull", "Anna_Hummingbird", "Ruby_throated_Hummingbird", "Rufous_Hummingbird",
    "Green_Violetear", "Long_tailed_Jaeger", "Pomarine_Jaeger", "Blue_Jay", "Florida_Jay", "Green_Jay",
    "Dark_eyed_Junco", "Tropical_Kingbird", "Gray_Kingbird", "Belted_Kingfisher", "Green_Kingfisher", "Pied_Kingfisher",
    "Ringed_Kingfisher", "White_breasted_Kingfisher", "Red_legged_Kittiwake", "Horned_Lark", "Pacific_Loon", "Mallard",
    "Western_Meadowlark", "Hooded_Merganser", "Red_breasted_Merganser", "Mockingbird", "Nighthawk", "Clark_Nutcracker",
    "White_breasted_Nuthatch", "Baltimore_Oriole", "Hooded_Oriole", "Orchard_Oriole", "Scott_Oriole", "Ovenbird",
    "Brown_Pelican", "White_Pelican", "Western_Wood_Pewee", "Sayornis", "American_Pipit", "Whip_poor_Will",
    "Horned_Puffin", "Common_Raven", "White_necked_Raven", "American_Redstart", "Geococcyx", "Loggerhead_Shrike",
    "Great_Grey_Shrike", "Baird_Sparrow", "Black_throated_Sparrow", "Brewer_Sparrow", "Chipping_Sparrow",
    "Clay_colored_Sparrow", "House_Sparrow", "Field_Sparrow", "Fox_Sparrow", "Grasshopper_Sparrow", "Harris_Sparrow",
    "Henslow_Sparrow", "Le_Conte_Sparrow", "Lincoln_Sparrow", "Nelson_Sharp_tailed_Sparrow", "Savannah_Sparrow",
    "Seaside_Sparrow", "Song_Sparrow", "Tree_Sparrow", "Vesper_Sparrow", "White_crowned_Sparrow",
    "White_throated_Sparrow", "Cape_Glossy_Starling", "Bank_Swallow", "Barn_Swallow", "Cliff_Swallow", "Tree_Swallow",
    "Scarlet_Tanager", "Summer_Tanager", "Arctic_Tern", "Black_Tern", "Caspian_Tern", "Common_Tern", "Elegant_Tern",
    "Forster_Tern", "Least_Tern", "Green_tailed_Towhee", "Brown_Thrasher", "Sage_Thrasher", "Black_capped_Vireo",
    "Blue_headed_Vireo", "Philadelphia_Vireo", "Red_eyed_Vireo", "Warbling_Vireo", "White_eyed_Vireo",
    "Yellow_throated_Vireo", "Bay_breasted_Warbler", "Black_and_white_Warbler", "Black_throated_Blue_Warbler",
    "Blue_winged_Warbler", "Canada_Warbler", "Cape_May_Warbler", "Cerulean_Warbler", "Chestnut_sided_Warbler",
    "Golden_winged_Warbler", "Hooded_Warbler", "Kentucky_Warbler", "Magnolia_Warbler", "Mourning_Warbler",
    "Myrtle_Warbler", "Nashville_Warbler", "Orange_crowned_Warbler", "Palm_Warbler", "Pine_Warbler", "Prairie_Warbler",
    "Prothonotary_Warbler", "Swainson_Warbler", "Tennessee_Warbler", "Wilson_Warbler", "Worm_eating_Warbler",
    "Yellow_Warbler", "Northern_Waterthrush", "Louisiana_Waterthrush", "Bohemian_Waxwing", "Cedar_Waxwing",
    "American_Three_toed_Woodpecker", "Pileated_Woodpecker", "Red_bellied_Woodpecker", "Red_cockaded_Woodpecker",
    "Red_headed_Woodpecker", "Downy_Woodpecker", "Bewick_Wren", "Cactus_Wren", "Carolina_Wren", "House_Wren",
    "Marsh_Wren", "Rock_Wren", "Winter_Wren", "Common_Yellowthroat",
]


class CUB200(CatalogBuilder):
    """Caltech-UCSD Birds-200-2011 (Wah et al., 2011); labels 0-199 (the files' 1-200, minus one)."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://www.vision.caltech.edu/datasets/cub_200_2011/",
        assets={"train": _ARCHIVE, "test": _ARCHIVE},
        citation="""@techreport{WahCUB_200_2011,
  Title={The Caltech-UCSD Birds-200-2011 Dataset},
  Author={Wah, C. and Branson, S. and Welinder, P. and Perona, P. and Belongie, S.},
  Year={2011},
  Institution={California Institute of Technology},
  Number={CNS-TR-2011-001}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="The Caltech-UCSD Birds-200-2011 dataset: 11,788 images of 200 bird species, split into "
                        "5,994 training and 5,794 test images. The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 5_994, "test": 5_794},
        )

    def _generate_examples(self, data_path, split):
        tables = {name.removeprefix(_ROOT): _table(data_path, name, fh.read())
                  for name, fh in members_in_order(data_path, [_ROOT + t for t in _TABLES])}
        paths, classes, training = (tables[t] for t in _TABLES)
        wanted = "1" if split == "train" else "0"
        ids = [image_id for image_id in paths if training.get(image_id) == wanted]
        missing = [i for i in ids if i not in classes]
        if missing:
            raise StableDatasetsError(f"{data_path}: image_class_labels.txt lacks the image id(s) {missing[:5]}")
        members = [f"{_ROOT}images/{paths[i]}" for i in ids]
        for image_id, (_, fh) in zip(ids, members_in_order(data_path, members)):
            yield int(image_id), {"image": fh.read(), "label": int(classes[image_id]) - 1}


def _table(archive: str, name: str, data: bytes) -> dict[str, str]:
    """"<id> <value>" lines as {id: value}, in the file's order."""
    rows = [line.split(maxsplit=1) for line in lines_of(data)]
    bad = next((i for i, row in enumerate(rows, 1) if len(row) != 2), None)
    if bad is not None:
        raise StableDatasetsError(f"{archive}:{name} line {bad} is not '<id> <value>'")
    return dict(rows)  # type: ignore[arg-type]
