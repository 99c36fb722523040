"""The session-end thread check (tests/fixtures/threads.py) fails a run that leaks a thread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

LEAKING = """
import threading

from dynconf_k8s.operator.controller import WorkQueue


def test_leaks_a_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    threading.Thread(target=queue.get, args=(threading.Event(),), name="leaked", daemon=True).start()
"""

CLEAN = """
import threading


def test_joins_its_thread() -> None:
    thread = threading.Thread(target=lambda: None, name="joined")
    thread.start()
    thread.join()
"""


def _pytest(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_case.py"
    test.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "tests.fixtures.threads", str(test)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_a_thread_of_our_code_left_running_fails_the_session(tmp_path: Path) -> None:
    result = _pytest(tmp_path, LEAKING)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "threads left running after the session (FAILS the run)" in result.stdout
    assert "leaked (daemon, ours)" in result.stdout
    assert "controller.py" in result.stdout  # the stack says where it is stuck


def test_a_session_whose_threads_ended_passes(tmp_path: Path) -> None:
    result = _pytest(tmp_path, CLEAN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "threads left running" not in result.stdout
