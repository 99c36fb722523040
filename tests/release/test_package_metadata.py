"""What every distribution of the workspace carries so it can be released on its own."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import dynconf
from dynconf.plugins import discover

REPO = Path(__file__).resolve().parents[2]
PYPROJECTS = sorted((REPO / "packages").glob("*/pyproject.toml"))


def _project(pyproject: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads(pyproject.read_text())["project"]
    return project


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=[p.parent.name for p in PYPROJECTS])
def test_each_package_has_a_changelog_entry_for_its_version(pyproject: Path) -> None:
    version = _project(pyproject)["version"]
    changelog = (pyproject.parent / "CHANGELOG.md").read_text()
    assert changelog.startswith("# Changelog\n")
    assert "\n## [Unreleased]\n" in changelog
    assert re.search(
        rf"(?m)^## \[{re.escape(str(version))}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog
    )


@pytest.mark.parametrize(
    "pyproject",
    [p for p in PYPROJECTS if p.parent.name != "dynconf-core"],
    ids=[p.parent.name for p in PYPROJECTS if p.parent.name != "dynconf-core"],
)
def test_each_package_on_the_core_declares_a_closed_range_that_holds_this_core(
    pyproject: Path,
) -> None:
    project = _project(pyproject)
    extras = project.get("optional-dependencies", {})
    assert isinstance(extras, dict)
    requirements = [*project["dependencies"], *(r for rs in extras.values() for r in rs)]
    on_core = [r for r in requirements if re.match(r"dynconf-core\b", r)]
    assert on_core, "it must depend on dynconf-core"
    for requirement in on_core:
        low = re.search(r">=\s*([\d.]+)", requirement)
        high = re.search(r"<\s*([\d.]+)", requirement)
        assert low and high, f"{requirement}: a range needs a lower and an upper bound"
        core = tuple(int(x) for x in dynconf.__version__.split("."))
        assert tuple(int(x) for x in low[1].split(".")) <= core[: low[1].count(".") + 1]
        assert core[: high[1].count(".") + 1] < tuple(int(x) for x in high[1].split("."))


def test_the_core_version_literal_is_the_distribution_version() -> None:
    assert dynconf.__version__ == _project(REPO / "packages/dynconf-core/pyproject.toml")["version"]


def test_every_installed_workspace_plugin_declares_this_plugin_api() -> None:
    registry = discover()
    assert registry.refused == []
    assert {e.name for e in registry.plugins} >= {"builtin", "consul", "redis", "vault", "s3"}
