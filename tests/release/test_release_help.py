"""``scripts/release --help`` names every command it takes; ``--version`` is the workspace's.

Both run against this checkout: asking how to release never plans, builds or tags.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.release import release_argv

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from release_lib import (  # noqa: E402
    ARTIFACT_COMMANDS,
    COMMANDS,
    PYTHON_COMMANDS,
    current_version,
)


def _release(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        release_argv(REPO, *argv), capture_output=True, text=True, timeout=60, cwd=REPO
    )


def test_help_lists_every_command_the_script_dispatches() -> None:
    result = _release("--help")
    assert result.returncode == 0, result.stderr
    dispatched = {*ARTIFACT_COMMANDS, *PYTHON_COMMANDS, "tag-first"}
    assert set(COMMANDS) == dispatched
    for name in dispatched:
        assert f"\n  {name} " in result.stdout, name


@pytest.mark.parametrize("command", sorted({*ARTIFACT_COMMANDS, *PYTHON_COMMANDS, "tag-first"}))
def test_each_commands_help_exits_0(command: str) -> None:
    result = _release(command, "--help")
    assert result.returncode == 0, result.stderr
    assert f"scripts/release {command}" in result.stdout


def test_version_prints_the_workspace_version() -> None:
    result = _release("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"scripts/release {current_version(REPO)}\n"
