"""Bundled builder scripts (installed as stable_datasets.bundled_builders). One file per dataset."""
