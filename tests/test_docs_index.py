"""docs/index.md lists every page of docs/, and the README points at it."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _links(page: Path) -> set[str]:
    return set(re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", page.read_text()))


def test_the_docs_index_lists_every_page():
    pages = {page.name for page in DOCS.glob("*.md")} - {"index.md"}
    assert pages - _links(DOCS / "index.md") == set()


def test_every_page_the_docs_index_links_exists():
    assert {link for link in _links(DOCS / "index.md") if not (DOCS / link).exists()} == set()


def test_the_readme_links_the_docs_index_and_the_comparison():
    links = _links(DOCS.parent / "README.md")
    assert {"docs/index.md", "docs/comparison.md"} <= links
