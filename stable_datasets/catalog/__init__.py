"""The catalog: upstream stable-datasets' datasets by its names (stable_datasets.images, .video, .timeseries),
each a `CatalogBuilder` whose class, called, loads the data. See docs/catalog.md."""

from stable_datasets.catalog.builder import CATALOG_PACKAGES, CatalogBuilder, LoadsWhenCalled, catalog_classes
from stable_datasets.catalog.source import DatasetSource, DownloadInfo

#: upstream's name for the base class of a builder
BaseDatasetBuilder = CatalogBuilder

__all__ = ["CATALOG_PACKAGES", "BaseDatasetBuilder", "CatalogBuilder", "DatasetSource", "DownloadInfo",
           "LoadsWhenCalled", "catalog_classes"]
