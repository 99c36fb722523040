"""What every distribution of the workspace carries so it can be released on its own."""

from __future__ import annotations

import re
import runpy
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


def _claimed_pythons() -> list[str]:
    """The minors ``scripts/pythons`` tests, as ``3.N``: the one home of the claimed range."""
    pythons = runpy.run_path(str(REPO / "scripts" / "pythons"), run_name="pythons")
    return [f"{major}.{minor}" for major, minor in pythons["claimed_minors"]()]


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=[p.parent.name for p in PYPROJECTS])
def test_each_package_carries_the_repository_license(pyproject: Path) -> None:
    project = _project(pyproject)
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    # a package's sdist holds only its own directory, so the file is a copy, kept identical
    assert (pyproject.parent / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=[p.parent.name for p in PYPROJECTS])
def test_each_package_describes_itself_with_its_readme(pyproject: Path) -> None:
    assert _project(pyproject)["readme"] == "README.md"
    assert (pyproject.parent / "README.md").read_text(encoding="utf-8").strip()


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=[p.parent.name for p in PYPROJECTS])
def test_each_package_names_the_same_authors_and_project_links(pyproject: Path) -> None:
    project = _project(pyproject)
    home = "https://github.com/dynconf/dynconf"
    assert project["authors"] == [{"name": "The dynconf authors"}]
    assert project["urls"] == {
        "Homepage": home,
        "Source": home,
        "Documentation": f"{home}/tree/main/docs",
        "Changelog": f"{home}/blob/main/packages/{pyproject.parent.name}/CHANGELOG.md",
    }
    keywords = project["keywords"]
    assert isinstance(keywords, list) and {"configuration", "dynconf"} <= set(keywords)


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=[p.parent.name for p in PYPROJECTS])
def test_each_package_classifies_the_pythons_the_workspace_tests(pyproject: Path) -> None:
    classifiers = _project(pyproject)["classifiers"]
    assert isinstance(classifiers, list)
    prefix = "Programming Language :: Python :: "
    versions = [c.removeprefix(prefix) for c in classifiers if re.fullmatch(rf"{prefix}3\.\d+", c)]
    assert versions == _claimed_pythons()
    assert {f"{prefix}3", f"{prefix}3 :: Only", "Typing :: Typed"} <= set(classifiers)
    # PEP 639: the license expression is the license; a License classifier would restate it
    assert not [c for c in classifiers if c.startswith("License ::")]


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
