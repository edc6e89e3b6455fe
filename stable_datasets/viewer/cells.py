"""Rows as JSON for the viewer's pages: every cell an object with a `kind`, media as URLs.

Kinds: `null`, `value` (numbers, bools), `label` (ClassLabel: id and name), `text` (cut at
TEXT_CHARS, with its full length), `image` / `video` (a URL the server renders to PNG, plus
size), `images` (a list of image URLs), `array` (shape, dtype, the first values), `list`,
`json` (anything else, as short JSON text). Two row shapes also get a whole-row view:
a packed SFT pack (`input_ids`, `loss_mask`, `seq_start_id`: the sequences' bounds, the
loss-mask runs, and each sequence's text when the tokenizer is known), and an interleaved
document (`texts` and `images` aligned, one slot per item).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from stable_datasets.dataset.display import image_label
from stable_datasets.features.image import Image
from stable_datasets.features.sequence import Sequence
from stable_datasets.features.value import ClassLabel
from stable_datasets.features.video import Video, VideoRef, VideoWindow
from stable_datasets.sft.tokenize import ByteTokenizer

TEXT_CHARS = 2000
LIST_ITEMS = 32
PACK_COLUMNS = ("input_ids", "loss_mask", "seq_start_id")
PACK_TEXT_CHARS = 400
#: a pack view lists at most this many sequences (and loss runs per sequence); the totals are given beside
PACK_SEQUENCES = 64
PACK_RUNS = 32


def media_url(cache: str, row: int, column: str, item: int | None = None) -> str:
    from urllib.parse import quote

    tail = "" if item is None else f"/{item}"
    return f"/media/{cache}/{row}/{quote(column, safe='')}{tail}.png"


def cell(value: Any, feature: Any, url: Callable[[int | None], str]) -> dict[str, Any]:
    """One decoded cell as JSON; `url(item)` is where the server renders its picture."""
    if value is None:
        return {"kind": "null"}
    if isinstance(feature, ClassLabel):
        index = int(value)
        name = feature.names[index] if 0 <= index < len(feature.names) else None
        return {"kind": "label", "value": index, "name": name}
    if isinstance(feature, Image) and isinstance(value, np.ndarray):
        return {"kind": "image", "url": url(None), "width": int(value.shape[1]), "height": int(value.shape[0]),
                "label": image_label(value)}
    if isinstance(value, VideoRef):
        return {"kind": "video", "url": url(None), "label": f"{value.extension}, {value.size:,} bytes"}
    if isinstance(feature, (Video, VideoWindow)) and isinstance(value, np.ndarray):
        return {"kind": "video", "url": url(None), "frames": int(value.shape[0]),
                "label": f"{value.shape[0]} frames {value.shape[2]}x{value.shape[1]}"}
    if isinstance(feature, Sequence) and isinstance(feature.feature, Image) and isinstance(value, list):
        return {"kind": "images", "items": [None if v is None else {"url": url(i), "label": image_label(v)}
                                            for i, v in enumerate(value[:LIST_ITEMS])], "length": len(value)}
    if isinstance(value, str):
        return {"kind": "text", "text": value[:TEXT_CHARS], "length": len(value)}
    if isinstance(value, (bool, int, float, np.generic)):
        return {"kind": "value", "value": value.item() if isinstance(value, np.generic) else value}
    if isinstance(value, np.ndarray):
        return {"kind": "array", "shape": list(value.shape), "dtype": str(value.dtype),
                "values": value.reshape(-1)[:LIST_ITEMS].tolist()}
    if isinstance(value, (bytes, bytearray)):
        return {"kind": "text", "text": f"<{len(value):,} bytes>", "length": len(value)}
    if isinstance(value, list) and all(isinstance(v, (int, float, bool, str)) for v in value[:LIST_ITEMS]):
        return {"kind": "list", "values": value[:LIST_ITEMS], "length": len(value)}
    text = json.dumps(_bounded(value), default=str)
    return {"kind": "json", "text": text[:TEXT_CHARS], "length": len(text)}


def error_cell(exc: BaseException) -> dict[str, Any]:
    """A cell that cannot be decoded (a damaged image, a truncated frame): marked, the rest of the page stands."""
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"cannot decode: {type(exc).__name__}" + (f": {line}" if line else "")
    return {"kind": "error", "text": text[:TEXT_CHARS], "length": len(text)}


def _bounded(value: Any, depth: int = 0) -> Any:
    """`value` with lists cut to LIST_ITEMS items, mappings to LIST_ITEMS fields, text to TEXT_CHARS, arrays to a
    summary, and nesting to 8 levels: what a cell shows of it, built without walking (or dumping) all of it."""
    if depth > 8:
        return "..."
    if isinstance(value, str):
        return value[:TEXT_CHARS]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value):,} bytes>"
    if isinstance(value, np.ndarray):
        return {"array": list(value.shape), "dtype": str(value.dtype)}
    if isinstance(value, Mapping):
        return {str(k): _bounded(v, depth + 1) for k, v in itertools.islice(value.items(), LIST_ITEMS)}
    if isinstance(value, (list, tuple)):
        return [_bounded(v, depth + 1) for v in value[:LIST_ITEMS]]
    return value


def _runs(mask: np.ndarray, start: int, stop: int) -> list[list[int]]:
    """[start, stop) runs of mask == 1 inside one sequence."""
    part = (np.asarray(mask[start:stop]) != 0).astype(np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], part, [0]])))
    return [[start + int(a), start + int(b)] for a, b in zip(edges[::2], edges[1::2])]


def pack_view(row: Mapping[str, Any], decode: Callable[[list[int]], str] | None) -> dict[str, Any]:
    """A pack's sequences ([start, end) token ranges from `seq_start_id`), the loss-mask runs in each,
    and each sequence's text when `decode` is given. Bounded whatever the pack holds: the first
    PACK_SEQUENCES sequences (`num_sequences` says how many there are), PACK_RUNS runs each
    (`num_runs`), and a text decoded from at most 4 x PACK_TEXT_CHARS tokens, cut to PACK_TEXT_CHARS."""
    ids = np.asarray(row["input_ids"])
    mask = np.asarray(row["loss_mask"])
    starts = np.asarray(row["seq_start_id"]).reshape(-1)
    bounds = [*(int(s) for s in starts[:PACK_SEQUENCES]), len(ids)] if len(starts) <= PACK_SEQUENCES else \
        [int(s) for s in starts[:PACK_SEQUENCES + 1]]
    sequences = []
    for a, b in itertools.pairwise(bounds):
        a, b = max(0, min(a, len(ids))), max(0, min(b, len(ids)))  # a damaged start list: clipped, not a crash
        runs = _runs(mask, a, b)
        item: dict[str, Any] = {"start": a, "end": b, "loss": runs[:PACK_RUNS], "num_runs": len(runs),
                                "loss_tokens": int((mask[a:b] != 0).sum())}
        if decode is not None:
            item["text"] = decode(ids[a:min(b, a + 4 * PACK_TEXT_CHARS)].tolist())[:PACK_TEXT_CHARS]
        sequences.append(item)
    return {"kind": "pack", "length": len(ids), "num_sequences": len(starts), "sequences": sequences}


def byte_decoder(metadata_sections: list[Any]) -> Callable[[list[int]], str] | None:
    """The built-in byte tokenizer's decode when the cache records it as its tokenizer (else None:
    other tokenizers are not loaded by a viewer)."""

    def names_byte(node: Any) -> bool:
        if isinstance(node, dict):
            return node.get("kind") == "byte" or any(names_byte(v) for v in node.values())
        if isinstance(node, list):
            return any(names_byte(v) for v in node)
        return False

    return ByteTokenizer().decode if any(names_byte(s) for s in metadata_sections) else None


def is_pack(features: Mapping[str, Any]) -> bool:
    return all(c in features for c in PACK_COLUMNS)


def is_document(features: Mapping[str, Any]) -> bool:
    texts, images = features.get("texts"), features.get("images")
    return isinstance(texts, Sequence) and isinstance(images, Sequence) and isinstance(images.feature, Image)


def document_view(row: Mapping[str, Any], url: Callable[[int | None], str]) -> dict[str, Any]:
    """An interleaved document's items in order: text or image per slot."""
    items: list[dict[str, Any]] = []
    texts, images = row.get("texts") or [], row.get("images") or []
    for i in range(max(len(texts), len(images))):
        text = texts[i] if i < len(texts) else None
        image = images[i] if i < len(images) else None
        if image is not None:
            items.append({"kind": "image", "url": url(i), "label": image_label(image)})
        elif text is not None:
            items.append({"kind": "text", "text": text[:TEXT_CHARS], "length": len(text)})
    return {"kind": "document", "items": items}
