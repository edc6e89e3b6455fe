"""Feature types: the schema language of builders and caches."""

from stable_datasets.features.array import Array2D, Array3D, Array4D, Array5D
from stable_datasets.features.base import FeatureType, feature_from_dict
from stable_datasets.features.features import Features
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import List, Sequence
from stable_datasets.features.value import ClassLabel, Value
from stable_datasets.features.video import Video, VideoDecodeConfig, VideoRef

__all__ = [
    "Array2D", "Array3D", "Array4D", "Array5D", "ClassLabel", "FeatureType", "Features", "Image", "List",
    "Sequence", "Value", "Video", "VideoDecodeConfig", "VideoRef", "feature_from_dict",
]
