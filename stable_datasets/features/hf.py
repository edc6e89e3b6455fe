"""Our features <-> Hugging Face `datasets` features, for moving datasets between the two.

Reading goes through `Features.from_dict`, which understands Hugging Face's serialized form;
writing builds `datasets` feature objects (imported only here, only when asked).
"""

from __future__ import annotations

from typing import Any

from stable_datasets.errors import missing_extra
from stable_datasets.features.array import Array2D, Array3D, Array4D, Array5D
from stable_datasets.features.base import FeatureType
from stable_datasets.features.features import Features
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import ClassLabel, Value

# Image modes that are PIL modes too (what datasets.Image(mode=) converts to on decode).
_PIL_MODES = {"RGB", "RGBA", "L", "I;16"}


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise missing_extra("converting features to Hugging Face", "the datasets package", "hf") from None
    return datasets


def from_hf_features(hf_features: Any) -> Features:
    """Our `Features` for a `datasets.Features` (or its `to_dict()` / a dataset_info.json "features")."""
    data = hf_features.to_dict() if hasattr(hf_features, "to_dict") else hf_features
    return Features.from_dict(_our_equivalents(data))


_DATE_OR_TIME_DTYPES = ("timestamp[", "date32", "date64", "time32", "time64")


def _our_equivalents(data: Any, where: str = "") -> Any:
    """Hugging Face's serialized features with what has no feature here replaced by its stored form:
    timestamp/date/time Values as Value("string") (ISO text, as our file loaders store them) and a
    `null` Value (a column with no value yet) as Value("string"), as the loaders infer it. An array
    with a dynamic first dimension is an error naming the column."""
    if isinstance(data, list):
        return [_our_equivalents(item, where) for item in data]
    if not isinstance(data, dict):
        return data
    kind = data.get("_type")
    if kind == "Value" and (str(data.get("dtype", "")).startswith(_DATE_OR_TIME_DTYPES) or data.get("dtype") == "null"):
        return {**data, "dtype": "string"}
    if str(kind).startswith("Array") and None in (data.get("shape") or ()):
        raise ValueError(f"feature {where!r}: {kind} with shape {tuple(data['shape'])} has a dynamic first dimension, "
                         "which fixed-shape arrays here cannot hold; store it as nested Sequence features instead")
    if kind is None:  # a dict of features
        return {key: _our_equivalents(value, f"{where}.{key}" if where else key) for key, value in data.items()}
    return {key: _our_equivalents(value, where) for key, value in data.items()}


def to_hf_features(features: Features) -> Any:
    """The `datasets.Features` equivalent of `features`; a feature with no equivalent is an error naming it."""
    datasets = _datasets()
    return datasets.Features({name: to_hf_feature(feature, name) for name, feature in features.items()})


def to_hf_feature(feature: FeatureType, where: str = "feature") -> Any:
    datasets = _datasets()
    if isinstance(feature, Features):
        return {name: to_hf_feature(f, f"{where}.{name}") for name, f in feature.items()}
    if isinstance(feature, ClassLabel):
        return datasets.ClassLabel(names=list(feature.names))
    if isinstance(feature, Value):
        return datasets.Value(feature.dtype)
    if isinstance(feature, Sequence):
        inner = to_hf_feature(feature.feature, f"{where}[]")
        if hasattr(datasets, "List"):  # datasets >= 4
            return datasets.List(inner, length=feature.length)
        if isinstance(inner, dict):  # older datasets: Sequence(dict) would mean a dict of lists
            if feature.length != -1:
                raise ValueError(f"{where}: a fixed-length list of structs has no equivalent in datasets "
                                 f"{datasets.__version__}")
            return [inner]
        return datasets.Sequence(inner, length=feature.length)
    for ours, name in ((Array2D, "Array2D"), (Array3D, "Array3D"), (Array4D, "Array4D"),
                       (Array5D, "Array5D")):
        if isinstance(feature, ours):
            return getattr(datasets, name)(shape=tuple(feature.shape), dtype=feature.dtype)
    if isinstance(feature, Image):
        return datasets.Image(mode=feature.mode if feature.mode in _PIL_MODES else None, decode=feature.decode_images)
    raise ValueError(f"{where}: {type(feature).__name__} has no Hugging Face equivalent")


__all__ = ["from_hf_features", "to_hf_feature", "to_hf_features"]
