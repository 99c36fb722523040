"""The clone every ``scripts/release`` test here releases from (:mod:`tests.fixtures.release`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.release import release_clone


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A tagless clone of the committed tree with a committer."""
    return release_clone(tmp_path / "repo")
