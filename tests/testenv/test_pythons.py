"""``scripts/pythons``: which interpreters the bounded tier runs on, and what it runs."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("dynconf_pythons", str(REPO / "scripts/pythons"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


pythons = _load()


def test_the_claimed_minors_run_from_the_requires_python_floor_to_the_newest() -> None:
    floor = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    minors = pythons.claimed_minors()
    assert f">={minors[0][0]}.{minors[0][1]}" == floor.replace(" ", "")
    assert minors[-1] == pythons.NEWEST
    assert minors == sorted(set(minors))


def test_the_tier_deselects_every_declared_marker() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = [m.split(":")[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]]
    expression = pythons.tier_markers()
    assert expression.startswith("not (")
    assert sorted(expression[5:-1].split(" or ")) == sorted(declared)


def test_every_path_the_tier_names_exists() -> None:
    missing = [p for p in (*pythons.TIER, *pythons.LEFT_OUT) if not (REPO / p).exists()]
    assert not missing


def test_discovery_takes_the_oldest_patch_of_the_minor(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {
        "/shims/python3.11": pythons.Interpreter("/pyenv/3.11.7/bin/python3.11", (3, 11, 7)),
        "/usr/bin/python3.11": pythons.Interpreter("/usr/bin/python3.11", (3, 11, 2)),
        "/odd/python3.11": pythons.Interpreter("/odd/python3.12", (3, 12, 1)),
        "/broken/python3.11": None,
    }
    monkeypatch.setattr(pythons, "candidates", lambda uv, minor: iter(found))
    monkeypatch.setattr(pythons, "probe", found.get)

    chosen = pythons.discover("uv", (3, 11))

    assert chosen == pythons.Interpreter("/usr/bin/python3.11", (3, 11, 2))


@pytest.mark.parametrize(("ci", "code"), [("", 0), ("true", 1)], ids=["developer", "ci"])
def test_a_missing_interpreter_is_skipped_loudly_and_fails_only_in_ci(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ci: str, code: int
) -> None:
    monkeypatch.setenv("CI", ci)
    monkeypatch.delenv("DYNCONF_PYTHONS", raising=False)
    monkeypatch.setattr(pythons, "find_uv", lambda: "uv")
    monkeypatch.setattr(pythons, "discover", lambda uv, minor: None)
    monkeypatch.setattr(pythons.subprocess, "run", lambda *a, **k: None)  # no uv python install

    assert pythons.main(["--list"]) == code
    err = capsys.readouterr().err
    assert err.count(" found (PATH, pyenv, uv python find)") == len(pythons.claimed_minors())
