"""``scripts/release tag-first`` in a throwaway clone: the real repository is never tagged."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.fixtures.release import git, release_argv


def _tag_first(clone: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(release_argv(clone, "tag-first", *argv),
                          cwd=clone, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def _expected(clone: Path) -> set[str]:
    tags = set()
    for pyproject in (clone / "packages").glob("*/pyproject.toml"):
        text = pyproject.read_text()
        name = re.search(r'(?m)^name\s*=\s*"([^"]+)"', text)
        version = re.search(r'(?m)^version\s*=\s*"([^"]+)"', text)
        assert name and version
        tags.add(f"{name[1]}-v{version[1]}")
    return tags


def test_tag_first_tags_every_package_at_head_with_its_version(clone: Path) -> None:
    head = git(clone, "rev-parse", "HEAD").strip()

    result = _tag_first(clone)

    assert result.returncode == 0, result.stderr
    tags = set(git(clone, "tag", "--list").split())
    assert tags == _expected(clone) and len(tags) == len(list(clone.glob("packages/*/")))
    for tag in tags:
        assert git(clone, "rev-parse", f"{tag}^{{commit}}").strip() == head
        assert git(clone, "cat-file", "-t", tag).strip() == "tag"  # annotated
    assert result.stdout.count("release: tagged ") == len(tags)


def test_tag_first_dry_run_names_the_tags_and_creates_none(clone: Path) -> None:
    result = _tag_first(clone, "--dry-run")

    assert result.returncode == 0, result.stderr
    assert set(re.findall(r"would tag (\S+)", result.stdout)) == _expected(clone)
    assert git(clone, "tag", "--list") == ""


def test_tag_first_refuses_when_one_tag_exists_and_creates_no_other(clone: Path) -> None:
    taken = sorted(_expected(clone))[0]
    git(clone, "tag", taken)

    result = _tag_first(clone)

    assert result.returncode == 1
    assert f"the tag {taken} exists already" in result.stderr
    assert "Traceback" not in result.stderr
    assert git(clone, "tag", "--list").split() == [taken]


def test_tag_first_refuses_a_dirty_tree_and_creates_none(clone: Path) -> None:
    readme = clone / "README.md"
    readme.write_text(readme.read_text() + "\nan uncommitted line\n")

    result = _tag_first(clone)

    assert result.returncode == 1
    assert "uncommitted changes; commit or drop them first" in result.stderr
    assert git(clone, "tag", "--list") == ""
