"""README's ``dynconf render`` line works in a fresh shell.

An output directory is the caller's to make (the agent's and ``dynconf render``'s rule: the
file's directory is the trusted root, refused when missing), so the line makes it first.
Run as printed from the repository, with a fresh directory in place of ``/tmp/cfg`` and
without ``--watch`` (one render, then exit).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE_DIR = "/tmp/cfg"


def _render_line() -> str:
    [line] = [ln for ln in (REPO / "README.md").read_text().splitlines() if "dynconf render " in ln]
    return line


def _bash(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_readmes_render_line_renders_into_a_directory_that_did_not_exist(tmp_path: Path) -> None:
    fresh = tmp_path / "not-yet" / "cfg"
    line = _render_line().replace(" --watch", "").replace(PAGE_DIR, str(fresh))
    result = _bash(line, REPO)
    assert result.returncode == 0, result.stderr
    assert (fresh / "app.properties").read_text().strip()


def test_render_refuses_a_missing_output_directory_naming_the_fix(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "app.properties"
    result = _bash(f"dynconf render --source file --key examples/app.yaml --out {out}", REPO)
    assert result.returncode == 1
    assert "does not exist; create it" in result.stderr
