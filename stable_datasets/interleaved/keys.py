"""Tar member keys that round-trip any sample_id.

WebDataset splits a member name at the first dot of its base name (key.extension) and
treats slashes as folders, so a key may contain neither. Percent-encoding every character
outside [A-Za-z0-9_-] (dots, slashes and '%' included) is injective and reversible: the
sample_id "a/b:c.d" becomes "a%2Fb%3Ac%2Ed" and comes back unchanged. (Quoting with
urllib's `quote(safe="")` leaves dots alone and so breaks the key split.)

Reading undoes any percent-encoding, ours or `quote`'s (NeMo Curator names members that way),
and leaves a '%' that starts no valid escape as it is.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

_SAFE = re.compile(r"[A-Za-z0-9_\-]")


def escape_key(sample_id: str) -> str:
    return "".join(ch if _SAFE.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
                   for ch in sample_id)


def unescape_key(key: str) -> str:
    return unquote(key)


def split_member(name: str) -> tuple[str, str]:
    """(key, extension) of a tar member the way WebDataset splits it."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    key = f"{folder}/{stem}" if folder else stem
    return key, extension if dot else ""
