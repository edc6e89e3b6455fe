"""Country211: photos from YFCC100M geotagged in 211 countries (ISO-3166 codes), 150 train / 50 validation / 100
test a country (31,650 / 10,550 / 21,100), OpenAI's geolocation benchmark for CLIP.

One archive, `country211/{train,valid,test}/<country code>/<file>.jpg`; the split is named `valid` as upstream
names it. Rows come in the archive's stored order, the JPEG bytes as stored.
"""

from __future__ import annotations

from stable_datasets.builder import DatasetInfo, Version
from stable_datasets.catalog import CatalogBuilder, DatasetSource, DownloadInfo
from stable_datasets.catalog.formats.image_archives import folder_label, stream_members
from stable_datasets.features import ClassLabel, Features, Image

#: torchvision's record (its prototype datasets' country211.py); no public record gives the size, so it is unset
_ARCHIVE = DownloadInfo("https://openaipublic.azureedge.net/clip/data/country211.tgz",
                        checksum="sha256:c011343cdc1296a8c31ff1d7129cf0b5e5b8605462cffd24f89266d6e6f4da3c")

COUNTRIES = [
    "AD", "AE", "AF", "AG", "AI", "AL", "AM", "AO", "AQ", "AR", "AT", "AU", "AW", "AX", "AZ", "BA", "BB", "BD", "BE",
    "BF", "BG", "BH", "BJ", "BM", "BN", "BO", "BQ", "BR", "BS", "BT", "BW", "BY", "BZ", "CA", "CD", "CF", "CH", "CI",
    "CK", "CL", "CM", "CN", "CO", "CR", "CU", "CV", "CW", "CY", "CZ", "DE", "DK", "DM", "DO", "DZ", "EC", "EE", "EG",
    "ES", "ET", "FI", "FJ", "FK", "FO", "FR", "GA", "GB", "GD", "GE", "GF", "GG", "GH", "GI", "GL", "GM", "GP", "GR",
    "GS", "GT", "GU", "GY", "HK", "HN", "HR", "HT", "HU", "ID", "IE", "IL", "IM", "IN", "IQ", "IR", "IS", "IT", "JE",
    "JM", "JO", "JP", "KE", "KG", "KH", "KN", "KP", "KR", "KW", "KY", "KZ", "LA", "LB", "LC", "LI", "LK", "LR", "LT",
    "LU", "LV", "LY", "MA", "MC", "MD", "ME", "MF", "MG", "MK", "ML", "MM", "MN", "MO", "MQ", "MR", "MT", "MU", "MV",
    "MW", "MX", "MY", "MZ", "NA", "NC", "NG", "NI", "NL", "NO", "NP", "NZ", "OM", "PA", "PE", "PF", "PG", "PH", "PK",
    "PL", "PR", "PS", "PT", "PW", "PY", "QA", "RE", "RO", "RS", "RU", "RW", "SA", "SB", "SC", "SD", "SE", "SG", "SH",
    "SI", "SJ", "SK", "SL", "SM", "SN", "SO", "SS", "SV", "SX", "SY", "SZ", "TG", "TH", "TJ", "TL", "TM", "TN", "TO",
    "TR", "TT", "TW", "TZ", "UA", "UG", "US", "UY", "UZ", "VA", "VE", "VG", "VI", "VN", "VU", "WS", "XK", "YE", "ZA",
    "ZM", "ZW",
]


class Country211(CatalogBuilder):
    """Country211 (Radford et al., 2021): which country a photo was taken in; labels are ISO-3166 codes."""

    VERSION = Version("1.0.0")
    TASK = "image classification"
    SOURCE = DatasetSource(
        homepage="https://github.com/openai/CLIP/blob/main/data/country211.md",
        assets={"train": _ARCHIVE, "valid": _ARCHIVE, "test": _ARCHIVE},
        citation="""@inproceedings{radford2021learning,
  title={Learning transferable visual models from natural language supervision},
  author={Radford, Alec and Kim, Jong Wook and Hallacy, Chris and Ramesh, Aditya and Goh, Gabriel and Agarwal,
    Sandhini and Sastry, Girish and Askell, Amanda and Mishkin, Pamela and Clark, Jack and others},
  booktitle={International conference on machine learning},
  pages={8748--8763},
  year={2021},
  organization={PMLR}}""",
    )

    def _info(self) -> DatasetInfo:
        return DatasetInfo(
            description="Country211: geotagged YFCC100M photos of 211 countries, 150 train, 50 validation and 100 "
                        "test images per country. The JPEG bytes are kept as published.",
            features=Features({"image": Image(), "label": ClassLabel(names=COUNTRIES)}),
            supervised_keys=("image", "label"),
            num_examples={"train": 31_650, "valid": 10_550, "test": 21_100},
        )

    def _generate_examples(self, data_path, split):
        classes = {code: index for index, code in enumerate(COUNTRIES)}
        prefix = f"country211/{split}/"
        for index, (name, data) in enumerate(stream_members(data_path, lambda member: member.startswith(prefix))):
            yield index, {"image": data, "label": folder_label(name, classes, where=data_path)}
