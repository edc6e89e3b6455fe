"""Every ```python block in docs/ runs, page by page, in a fresh namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
PAGES = sorted(DOCS.glob("*.md"))


def test_there_are_doc_pages():
    assert {p.name for p in PAGES} >= {"quickstart.md", "writing-a-builder.md", "features.md",
                                        "caches-and-fingerprints.md", "storage-formats-and-video.md",
                                        "shared-cache-on-a-cluster.md", "packed-sft.md",
                                        "interleaved.md", "parallel-builds.md", "in-memory-and-hf.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_doc_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = BLOCK.findall(page.read_text())
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"{page.name} block {number}", "exec"), namespace)


def test_the_loaders_page_exists():
    assert (DOCS / "load-your-own-files.md").is_file()
