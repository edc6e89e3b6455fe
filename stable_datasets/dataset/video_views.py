"""Video views of a dataset: how Video cells decode (`with_video_decode`) and which frame windows a frames cache
serves (`with_frame_windows`), a mixin of `StableDataset`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from stable_datasets.features.video import VideoDecodeConfig

if TYPE_CHECKING:
    from stable_datasets.dataset.stable_dataset import StableDataset


class VideoViews:
    """`StableDataset`'s video methods: a view with another video decode, or other frame windows."""

    def with_video_decode(self, config: VideoDecodeConfig | None) -> StableDataset:
        """A view whose Video cells decode to frames as `config` says (None: VideoRef cells)."""
        fmt = self._format
        return self._derive(format=dataclasses.replace(fmt, video_decode=config))

    def with_frame_windows(self, *, window_length: int | None = None, frame_stride: int | None = None,
                           hop: int | None = None, min_video_frames: int | None = None) -> StableDataset:
        """For video-frame caches: serve windows of `window_length` frames, `frame_stride` apart,
        starting every `hop` frames (default: window_length), from videos of at least
        `min_video_frames` frames. Rows change, so call it before select/shuffle/filter."""
        if self._indices is not None:
            raise ValueError("with_frame_windows changes the rows; call it before select, shuffle or filter")
        changes = {k: v for k, v in {"window_length": window_length, "frame_stride": frame_stride, "hop": hop,
                                     "min_video_frames": min_video_frames}.items() if v is not None}
        backends = []
        for backend in self._backends:
            if not set(changes) <= set(backend.READ_OPTIONS) or "window_length" not in backend.READ_OPTIONS:
                raise ValueError(f"with_frame_windows needs a cache that serves frame windows (a "
                                 f"Video(storage='frames') column), not a {backend.metadata.layout} cache")
            backends.append(type(backend)(backend.directory, backend.metadata, **{**backend.options, **changes}))
        return type(self)(backends, features=self._features, info=self._info, split=self._split,
                          format=self._format)

    def set_video_decode(self, config: VideoDecodeConfig | None) -> None:
        self._adopt_format(self.with_video_decode(config))
