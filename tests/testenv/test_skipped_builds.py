"""A background build that failed, and skipped the tests that needed it, ends the run with one line
naming the build and the command that rebuilds it (tests/fixtures/background.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.background import skipped_builds_line

REPO = Path(__file__).resolve().parents[2]

PLUGIN = 'pytest_plugins = ["tests.fixtures.background"]\n'
SESSION = """
import pytest


@pytest.fixture
def kube_node():
    pytest.skip("kubelet is not built")


def test_needs_the_node(kube_node):
    pass


@pytest.mark.parametrize("n", range(3))
def test_also_needs_the_node(kube_node, n):
    pass


def test_needs_nothing():
    pass
"""


def _failed(run: Path, name: str) -> None:
    """What the background worker leaves when the install of ``name`` raised."""
    failed = run / "background" / "failed"
    failed.mkdir(parents=True, exist_ok=True)
    (failed / name).write_text("go build kubelet failed after 300 s\n")


def test_the_line_counts_the_tests_the_failed_build_skipped(tmp_path: Path) -> None:
    _failed(tmp_path, "node")
    line = skipped_builds_line(tmp_path, {"a": {"kube", "node"}, "b": {"helm"}, "c": {"node"}})
    assert line == (
        f"dev: SKIPPED 2 tests: the node build failed "
        f"(see {tmp_path / 'logs' / 'background-install.log'}); "
        "rebuild with: python3 scripts/testenv install node"
    )


def test_no_line_when_no_skipped_test_needed_the_failed_build(tmp_path: Path) -> None:
    _failed(tmp_path, "promtool")
    assert skipped_builds_line(tmp_path, {"a": {"node"}}) is None
    assert skipped_builds_line(tmp_path / "no-run", {"a": {"node"}}) is None


def test_a_run_with_a_failed_build_ends_with_the_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _failed(run, "node")
    session = tmp_path / "session"
    session.mkdir()
    (session / "conftest.py").write_text(PLUGIN)
    (session / "test_it.py").write_text(SESSION)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(session)],
        cwd=session,
        env={**os.environ, "DYNCONF_TESTENV_RUN": str(run), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "1 passed, 4 skipped" in result.stdout, result.stdout + result.stderr
    last = result.stdout.rstrip().splitlines()[-1]
    assert last.startswith("dev: SKIPPED 4 tests: the node build failed"), result.stdout
    assert last.endswith("rebuild with: python3 scripts/testenv install node")


def test_in_ci_a_missing_build_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fixtures.servers import _unavailable

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="is not built"):
        _unavailable("kubelet v1.35.4 is not built")
