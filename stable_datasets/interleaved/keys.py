"""Tar member keys that round-trip any sample_id, named as NeMo Curator names them.

A key is `urllib.parse.quote(sample_id, safe="")`, exactly Curator's: slashes and every other
reserved character are percent-encoded, dots are not ("a/b:c.d" becomes "a%2Fb%3Ac.d"), so
tars written here and by Curator name the same sample the same way. Quoting is injective and
`unquote` reverses it. A key may hold dots, so nothing finds a document by splitting member
names at a dot: the reader takes each JSON member's name without its extension as the key,
and finds the document's images by the member names its JSON record lists.

`split_member` is WebDataset's own split (at the first dot of the base name), for tars made
with WebDataset's naming. Reading undoes any percent-encoding and leaves a '%' that starts no
valid escape as it is.
"""

from __future__ import annotations

from urllib.parse import quote, unquote


def escape_key(sample_id: str) -> str:
    """The tar key of a sample: `quote(sample_id, safe="")`, as NeMo Curator's writer names it."""
    return quote(sample_id, safe="")


def unescape_key(key: str) -> str:
    return unquote(key)


def split_member(name: str) -> tuple[str, str]:
    """(key, extension) of a tar member the way WebDataset splits it."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    key = f"{folder}/{stem}" if folder else stem
    return key, extension if dot else ""
