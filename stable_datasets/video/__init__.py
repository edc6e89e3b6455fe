"""Video datasets of the catalog, by upstream stable-datasets' names: `from stable_datasets.video import
MovingMNIST`; each is also `load_dataset("<module name>")`. See docs/catalog.md."""

from stable_datasets.catalog.exports import lazy_exports

#: class name -> module (the module's name is the dataset's name for load_dataset); SSv2 is upstream's alias
CLASSES = {"MovingMNIST": "moving_mnist", "SomethingSomethingV2": "something_something_v2",
           "SSv2": "something_something_v2"}
__all__, __getattr__, __dir__ = lazy_exports(__name__, CLASSES)
