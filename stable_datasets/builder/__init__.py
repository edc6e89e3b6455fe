"""The builder contract: configs, info, split generators and the build loop."""

from stable_datasets.builder.builder import DatasetBuilder, GeneratorBasedBuilder
from stable_datasets.builder.config import BuilderConfig, Version
from stable_datasets.builder.info import DatasetInfo, Split, SplitGenerator

__all__ = ["BuilderConfig", "DatasetBuilder", "DatasetInfo", "GeneratorBasedBuilder", "Split",
           "SplitGenerator", "Version"]
