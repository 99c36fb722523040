"""No page speaks of how dynconf is made: issue numbers, work sessions, to-do marks.

The patterns are data (``process_words.yaml``), each with sentences it must catch and product
sentences it must leave alone; a page that matches one fails, naming ``page:line``, the
pattern and why it is not a product word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted(
    {
        *REPO.glob("*.md"),
        *REPO.glob("docs/*.md"),
        *REPO.glob("charts/*/README.md"),
        *REPO.glob("docker/README.md"),
        *REPO.glob("packages/*/README.md"),
        *REPO.glob("policies/README.md"),
        *REPO.glob("examples/**/README.md"),
    }
)


@dataclass(frozen=True)
class Pattern:
    name: str
    why: str
    regex: re.Pattern[str]
    hits: tuple[str, ...]
    misses: tuple[str, ...]


def _patterns() -> list[Pattern]:
    rows = yaml.safe_load((Path(__file__).with_name("process_words.yaml")).read_text())
    return [
        Pattern(
            row["name"],
            row["why"],
            re.compile(row["pattern"], re.IGNORECASE),
            tuple(row["hits"]),
            tuple(row["misses"]),
        )
        for row in rows
    ]


PATTERNS = _patterns()
IDS = [pattern.name for pattern in PATTERNS]


def test_the_pages_are_found() -> None:
    names = {page.relative_to(REPO).as_posix() for page in PAGES}
    assert {"README.md", "docs/index.md", "docker/README.md", "SECURITY.md"} <= names
    assert any(name.startswith("packages/") for name in names)
    assert any(name.startswith("charts/") for name in names)


@pytest.mark.parametrize("pattern", PATTERNS, ids=IDS)
def test_pattern_catches_its_examples(pattern: Pattern) -> None:
    missed = [text for text in pattern.hits if not pattern.regex.search(text)]
    assert pattern.hits and not missed, f"{pattern.name}: does not catch {missed}"


@pytest.mark.parametrize("pattern", PATTERNS, ids=IDS)
def test_pattern_leaves_product_words_alone(pattern: Pattern) -> None:
    caught = [text for text in pattern.misses if pattern.regex.search(text)]
    assert not caught, f"{pattern.name}: catches product words {caught}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_page_has_no_process_words(page: Path) -> None:
    found = [
        f"{page.relative_to(REPO)}:{number}: {match.group(0)!r} ({pattern.name}: {pattern.why})"
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for pattern in PATTERNS
        for match in pattern.regex.finditer(line)
    ]
    assert not found, "\n".join(found)
