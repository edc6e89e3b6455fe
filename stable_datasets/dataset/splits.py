"""Split strings as Hugging Face writes them: "train", "train[:10%]", "train[10:20]", "train+test",
with an optional rounding for percentages: "train[:33%](pct1_dropremainder)" (default "closest").

As in Hugging Face, a percent sign on either bound makes both bounds percentages
("train[10%:20]" is 10% to 20%); "closest" rounds `pct * rows / 100` to the nearest row
(halves to even, as Python rounds); "pct1_dropremainder" uses whole 1% blocks of
`rows // 100` rows, so every 1% slice has the same size (and needs at least 100 rows).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_PART = re.compile(r"^\s*([\w.-]+)\s*(?:\[\s*(-?[\d_]+%?)?\s*:\s*(-?[\d_]+%?)?\s*\])?\s*(?:\(([^)]*)\))?\s*$")
ROUNDINGS = ("closest", "pct1_dropremainder")


@dataclass(frozen=True)
class SplitSlice:
    name: str
    start: str | None = None
    stop: str | None = None
    rounding: str | None = None

    def __post_init__(self) -> None:
        if self.rounding is not None:
            if self.rounding not in ROUNDINGS:
                raise ValueError(f"split rounding must be one of {ROUNDINGS}, got {self.rounding!r}")
            if not self.in_percent:
                raise ValueError(f"split {self.name!r}: a rounding ({self.rounding}) needs percent bounds, "
                                 "e.g. 'train[:10%](pct1_dropremainder)'")

    @property
    def is_whole(self) -> bool:
        return self.start is None and self.stop is None

    @property
    def in_percent(self) -> bool:
        return any(b is not None and b.endswith("%") for b in (self.start, self.stop))

    def bounds(self, num_rows: int) -> tuple[int, int]:
        """Resolve to [start, stop) rows, clipped like a Python slice."""
        percent, rounding = self.in_percent, self.rounding or "closest"
        if percent and rounding == "pct1_dropremainder" and num_rows < 100:
            raise ValueError(f"split {self.name!r} has {num_rows} rows: 'pct1_dropremainder' rounding needs at "
                             "least 100 (every 1% block would be empty)")

        def resolve(bound: str | None, default: int) -> int:
            if bound is None:
                return default
            value = int(bound.rstrip("%"))
            if percent:
                if not -100 <= value <= 100:
                    raise ValueError(f"split percentage {bound} is outside [-100%, 100%]")
                value = round(value * num_rows / 100) if rounding == "closest" else \
                    value * math.trunc(num_rows / 100)
            if value < 0:
                value += num_rows
            return min(max(value, 0), num_rows)

        start, stop = resolve(self.start, 0), resolve(self.stop, num_rows)
        return start, max(start, stop)


def parse_split(spec: str) -> list[SplitSlice]:
    """Parse a split expression; raise ValueError naming the part that does not parse."""
    parts = []
    for text in str(spec).split("+"):
        match = _PART.match(text)
        if not match:
            raise ValueError(f"cannot parse split {text.strip()!r} in {spec!r}; expected e.g. "
                             "'train', 'train[:10%]', 'train[10:20]', 'train[:10%](pct1_dropremainder)' or "
                             "'train+test'")
        parts.append(SplitSlice(match.group(1), match.group(2), match.group(3), match.group(4)))
    return parts
