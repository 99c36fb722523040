"""Servers that drop privileges start from a checkout (and a cache) under a 0700 parent.

A root user's clone lives in ``/root`` (mode 0700); PostgreSQL refuses to run as root, so
``testenv`` runs it as ``postgres``, who cannot traverse ``/root``. Its data (and, when they come
from the cache, its binaries) must be kept where that user reaches them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from testenv_lib.common import Context, read_env_file, traversable_by  # noqa: E402

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root drops privileges")


def _copy_checkout(parent: Path) -> Path:
    """The testenv scripts as a clone in ``parent`` would have them."""
    checkout = parent / "dynconf"
    shutil.copytree(
        REPO / "scripts", checkout / "scripts", ignore=shutil.ignore_patterns("__pycache__")
    )
    return checkout


def _as_postgres(*argv: str) -> subprocess.CompletedProcess[str]:
    import pwd

    entry = pwd.getpwnam("postgres")
    drop = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
    return subprocess.run([*drop, "--", *argv], capture_output=True, text=True, check=False)


@pytest.fixture
def private_parent(tmp_path: Path) -> Path:
    parent = tmp_path / "root-home"
    parent.mkdir(mode=0o700)
    return parent


@needs_root
@pytest.mark.postgres
@pytest.mark.timeout(180)
def test_postgres_starts_from_a_checkout_under_a_0700_parent(private_parent: Path) -> None:
    checkout = _copy_checkout(private_parent)
    testenv = [sys.executable, str(checkout / "scripts" / "testenv")]
    env = {k: v for k, v in os.environ.items() if k != "DYNCONF_TESTENV_RUN"}
    run = checkout / ".testenv"
    try:
        started = subprocess.run(
            [*testenv, "start", "postgres"], env=env, capture_output=True, text=True, timeout=150
        )
        assert started.returncode == 0, started.stderr[-3000:]
        values = read_env_file(run / "published" / "postgres.env")
        import psycopg

        with psycopg.connect(values["DYNCONF_TEST_POSTGRES_URL"], connect_timeout=10) as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
        outside = (run / "data" / "postgres").resolve()
        assert not outside.is_relative_to(private_parent)
    finally:
        subprocess.run([*testenv, "stop"], env=env, capture_output=True, timeout=60)
    assert not outside.exists(), "stop leaves the data kept outside the run dir behind"


@needs_root
def test_a_cached_tree_under_a_0700_parent_is_made_reachable(private_parent: Path) -> None:
    import pwd

    entry = pwd.getpwnam("postgres")
    tree = private_parent / "cache" / "debs" / "postgres"
    (tree / "bin").mkdir(parents=True)
    tool = tree / "bin" / "hello"
    tool.write_text("#!/bin/sh\necho hello\n")
    tool.chmod(0o755)
    ctx = Context(cache=private_parent / "cache", run=private_parent / "run")
    assert not traversable_by(tool, entry.pw_uid, entry.pw_gid)
    try:
        reachable = ctx.reachable_tree(tree, "postgres", "postgres-bin")
        assert traversable_by(reachable / "bin" / "hello", entry.pw_uid, entry.pw_gid)
        assert _as_postgres(str(reachable / "bin" / "hello")).stdout == "hello\n"
    finally:
        ctx.remove_data()
    assert not reachable.exists()
