"""The two Lance layouts in one room: `lance_rows` (rows.py) and `lance_video_frames` (video_frames.py), with
what they share: opening Lance safely after fork and its read errors (access.py), where the Lance dataset lies
(storage.py), the threaded fragment writer (write.py) and the blob-encoded binary columns (blobs.py).

The layout names recorded in `_metadata.json` are the layouts', not these files': caches written before this
package existed open unchanged (layouts.LAYOUTS maps each name to its module here). Only the cheap names are
exported; video_frames.py loads OpenCV, so it is imported by name where it is needed.
"""

from __future__ import annotations

from stable_datasets.layouts.lance.access import lance_read_errors, open_lance
from stable_datasets.layouts.lance.storage import DATASET_DIR

__all__ = ["DATASET_DIR", "lance_read_errors", "open_lance"]
