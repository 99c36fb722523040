"""``docs/index.md`` lists every page in ``docs/``, and every page's relative links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
INDEX = DOCS / "index.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
PAGES = sorted([*DOCS.glob("*.md"), REPO / "README.md", REPO / "SECURITY.md"])


def _relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [
        target.split("#", 1)[0]
        for target in LINK.findall(text)
        if not re.match(r"[a-z]+:", target) and not target.startswith("#")
    ]


def test_index_lists_every_page_in_docs() -> None:
    listed = {(DOCS / target).resolve() for target in _relative_links(INDEX)}
    pages = {page.resolve() for page in DOCS.glob("*.md")} - {INDEX.resolve()}
    missing = sorted(page.name for page in pages - listed)
    assert not missing, f"docs/index.md lists no row for {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [target for target in _relative_links(page) if not (page.parent / target).exists()]
    assert not broken, f"{page.relative_to(REPO)} links to missing files: {broken}"


REPOSITORY = "https://github.com/dynconf/dynconf/blob/main/"
PACKAGE_READMES = sorted(REPO.glob("packages/*/README.md"))


def _anchors(page: Path) -> set[str]:
    """The fragment GitHub gives each heading of ``page`` (lower case, punctuation dropped)."""
    headings = re.findall(r"(?m)^#+ +(.+?) *$", FENCE.sub("", page.read_text(encoding="utf-8")))
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize(
    "page", PACKAGE_READMES, ids=[p.relative_to(REPO).as_posix() for p in PACKAGE_READMES]
)
def test_every_link_of_a_package_readme_into_the_repository_resolves(page: Path) -> None:
    # a package's readme is also its description on an index, where only absolute links work
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if not target.startswith(REPOSITORY):
            continue
        path, _, anchor = target.removeprefix(REPOSITORY).partition("#")
        linked = REPO / path
        if not linked.is_file() or (anchor and anchor not in _anchors(linked)):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)} links to missing files or headings: {broken}"
