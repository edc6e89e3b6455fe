"""stable-datasets: build datasets once into fingerprinted caches and serve rows to training.

    import stable_datasets as sds
    ds = sds.load_dataset("digits", split="train")
"""

from stable_datasets.builder import (
    BuilderConfig,
    DatasetBuilder,
    DatasetInfo,
    GeneratorBasedBuilder,
    Split,
    SplitGenerator,
    Version,
)
from stable_datasets.catalog import BaseDatasetBuilder, DatasetSource, DownloadInfo
from stable_datasets.dataset.dataset_dict import DatasetDict
from stable_datasets.dataset.hf_names import split_dataset_by_node
from stable_datasets.dataset.interleave import interleave_datasets
from stable_datasets.dataset.saving import load_from_disk
from stable_datasets.dataset.stable_dataset import StableDataset
from stable_datasets.dataset.transforms import concatenate_datasets
from stable_datasets.download import DownloadManager, RemoteFile
from stable_datasets.features import (
    Array2D,
    Array3D,
    Array4D,
    Array5D,
    ClassLabel,
    Features,
    Image,
    List,
    Sequence,
    Value,
    Video,
    VideoDecodeConfig,
    VideoRef,
)
from stable_datasets.load import load_builder, load_dataset, open_cache
from stable_datasets.logs import standard_logging_requested, use_standard_logging
from stable_datasets.progress import disable_progress_bars, enable_progress_bars
from stable_datasets.registry import list_builders
from stable_datasets.version import __version__

#: Hugging Face's name for a dataset of rows (code written for `datasets.Dataset` reads `sds.Dataset`)
Dataset = StableDataset

__all__ = [
    "Array2D", "Array3D", "Array4D", "Array5D", "BaseDatasetBuilder", "BuilderConfig", "ClassLabel",
    "Dataset", "DatasetBuilder", "DatasetDict", "DatasetInfo", "DatasetSource", "DownloadInfo", "DownloadManager",
    "Features", "GeneratorBasedBuilder", "Image", "List", "RemoteFile", "Sequence", "Split", "SplitGenerator",
    "StableDataset", "Value", "Version", "Video", "VideoDecodeConfig", "VideoRef", "__version__",
    "concatenate_datasets", "disable_progress_bars", "enable_progress_bars", "interleave_datasets", "list_builders",
    "load_builder", "load_dataset", "load_from_disk", "open_cache", "split_dataset_by_node",
    "use_standard_logging",
]

if standard_logging_requested():
    use_standard_logging()
