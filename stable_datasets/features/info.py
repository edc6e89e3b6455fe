"""`DatasetInfo`: what a dataset is (its features and descriptive fields), carried by builders and by the
datasets they publish (`_metadata.json` keeps the descriptive fields; the features are stored canonically)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stable_datasets.features.base import as_feature
from stable_datasets.features.features import Features


@dataclass
class DatasetInfo:
    features: Features | dict | None = None
    description: str = ""
    homepage: str = ""
    citation: str = ""
    license: str = ""
    supervised_keys: tuple[str, str] | None = None
    #: rows each split must have ({"train": 50000, "test": 10000}): a build that yields another count fails
    #: before anything is published, unless verification_mode="no_checks" (builder.check_split_rows)
    num_examples: dict[str, int] | None = None

    def __post_init__(self) -> None:
        if self.features is None:
            raise ValueError("DatasetInfo needs features= (a Features or a dict of feature types)")
        feats = as_feature(self.features)
        if not isinstance(feats, Features):
            raise ValueError(f"DatasetInfo.features must be a dict of features, got {feats!r}")
        self.features = feats
        if self.supervised_keys is not None:
            self.supervised_keys = tuple(self.supervised_keys)  # type: ignore[assignment]
        if self.num_examples is not None:
            bad = {k: v for k, v in self.num_examples.items() if not isinstance(v, int) or isinstance(v, bool) or v < 0}
            if bad:
                raise ValueError(f"DatasetInfo.num_examples holds counts that are not whole numbers >= 0: {bad}")
            self.num_examples = {str(k): int(v) for k, v in self.num_examples.items()}

    def to_dict(self) -> dict[str, Any]:
        """Descriptive fields (features are stored separately, canonically); `num_examples` only when set, so
        the metadata of datasets without it is as before."""
        out = {"description": self.description, "homepage": self.homepage, "citation": self.citation,
               "license": self.license,
               "supervised_keys": list(self.supervised_keys) if self.supervised_keys else None}
        if self.num_examples is not None:
            out["num_examples"] = dict(self.num_examples)
        return out

    @classmethod
    def from_metadata(cls, features: Features, info: dict[str, Any]) -> DatasetInfo:
        keys = info.get("supervised_keys")
        return cls(features=features, description=info.get("description", ""),
                   homepage=info.get("homepage", ""), citation=info.get("citation", ""),
                   license=info.get("license", ""), supervised_keys=tuple(keys) if keys else None,
                   num_examples=info.get("num_examples"))
