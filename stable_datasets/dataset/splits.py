"""Split strings as Hugging Face writes them: "train", "train[:10%]", "train[10:20]", "train+test"."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PART = re.compile(r"^\s*([\w.-]+)\s*(?:\[\s*(-?\d+%?)?\s*:\s*(-?\d+%?)?\s*\])?\s*$")


@dataclass(frozen=True)
class SplitSlice:
    name: str
    start: str | None = None
    stop: str | None = None

    @property
    def is_whole(self) -> bool:
        return self.start is None and self.stop is None

    def bounds(self, num_rows: int) -> tuple[int, int]:
        """Resolve to [start, stop) rows, clipped like a Python slice; percentages round to nearest."""

        def resolve(bound: str | None, default: int) -> int:
            if bound is None:
                return default
            if bound.endswith("%"):
                pct = int(bound[:-1])
                if not -100 <= pct <= 100:
                    raise ValueError(f"split percentage {bound} is outside [-100%, 100%]")
                value = round(abs(pct) * num_rows / 100)
                value = -value if pct < 0 else value
            else:
                value = int(bound)
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
                             "'train', 'train[:10%]', 'train[10:20]' or 'train+test'")
        parts.append(SplitSlice(match.group(1), match.group(2), match.group(3)))
    return parts
