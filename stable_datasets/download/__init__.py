"""Downloading and extracting the source files of builders."""

from stable_datasets.download.manager import DownloadManager, RemoteFile

__all__ = ["DownloadManager", "RemoteFile"]
