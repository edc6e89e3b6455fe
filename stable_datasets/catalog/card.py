"""The catalog as people read it: one entry per dataset (name, task, splits and rows, download size, license,
extra needed, automatic or manual download), read from the builders themselves, so `docs/catalog.md`, the
`stable-datasets catalog` command and the viewer's cards say what the code does.

`python -m stable_datasets.catalog.card docs/catalog.md` rewrites the page's table (a test checks it matches).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from stable_datasets.catalog.builder import CatalogBuilder
from stable_datasets.registry import catalog_class, catalog_names

#: the docs page's table sits between these lines
TABLE_START, TABLE_END = "<!-- catalog table: start -->", "<!-- catalog table: end -->"


@dataclasses.dataclass(frozen=True)
class CatalogEntry:
    """What the catalog says of one dataset (its default config; `configs` lists the others)."""

    name: str
    class_name: str
    package: str
    task: str
    splits: dict[str, int | None]
    configs: list[str]
    download_bytes: int | None  # None when a file's size is not on record
    license: str
    extra: str | None
    manual: bool
    homepage: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def catalog_classes_by_name() -> dict[str, type[CatalogBuilder]]:
    """Every catalog dataset's builder class, by name (the registry's lookup, one name at a time)."""
    return {name: catalog_class(name) for name in catalog_names()}  # type: ignore[misc]


def catalog_entry(cls: type[CatalogBuilder]) -> CatalogEntry:
    """The entry of one builder class, from its default config (the first, when it names none)."""
    configs = [c.name for c in cls.BUILDER_CONFIGS]
    builder = cls.create(cls.DEFAULT_CONFIG_NAME or (configs[0] if configs else None))
    info, source = builder.info, builder._source()
    unique = {a.url: a.size for a in source.assets.values()}  # type: ignore[union-attr]
    size = None if not unique or any(s is None for s in unique.values()) else sum(unique.values())  # type: ignore
    return CatalogEntry(name=cls.builder_name(), class_name=cls.__name__, package=cls.__module__.split(".")[1],
                        task=cls.TASK, splits=dict(info.num_examples or {}), configs=configs, download_bytes=size,
                        license=info.license, extra=cls.EXTRA, manual=cls.MANUAL_DOWNLOAD is not None,
                        homepage=info.homepage)


def catalog_entries() -> list[CatalogEntry]:
    """Every catalog dataset's entry, by package then name."""
    entries = [catalog_entry(cls) for cls in catalog_classes_by_name().values()]
    return sorted(entries, key=lambda e: (("images", "video", "timeseries").index(e.package), e.name))


def human_bytes(size: int | None) -> str:
    if size is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    return "?"


def _splits_text(splits: dict[str, int | None]) -> str:
    return ", ".join(f"{s} {n:,}" if n is not None else s for s, n in splits.items()) or "?"


def catalog_markdown(entries: list[CatalogEntry]) -> str:
    """The docs page's table."""
    lines = ["| dataset | class | task | splits (rows) | configs | download | license | extra | download kind |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        configs = str(len(e.configs)) if e.configs else "-"
        lines.append(f"| `{e.name}` | `stable_datasets.{e.package}.{e.class_name}` | {e.task or '-'} | "
                     f"{_splits_text(e.splits)} | {configs} | {human_bytes(e.download_bytes)} | {e.license or '?'} "
                     f"| {e.extra or '-'} | {'manual (data_dir=)' if e.manual else 'automatic'} |")
    return "\n".join(lines) + "\n"


def catalog_text(entries: list[CatalogEntry]) -> str:
    """The table `stable-datasets catalog` prints: one line a dataset."""
    rows = [("NAME", "CLASS", "TASK", "SPLITS", "DOWNLOAD", "EXTRA", "KIND")]
    rows += [(e.name, f"{e.package}.{e.class_name}", e.task or "-", _splits_text(e.splits),
              human_bytes(e.download_bytes), e.extra or "-", "manual" if e.manual else "auto") for e in entries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows) + "\n"


def update_page(path: Path) -> bool:
    """Rewrite the table of the docs page at `path`; True when it changed."""
    text = path.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    updated = text[:start] + "\n" + catalog_markdown(catalog_entries()) + text[end:]
    if updated != text:
        path.write_text(updated)
    return updated != text


if __name__ == "__main__":
    print("updated" if update_page(Path(sys.argv[1])) else "unchanged")
