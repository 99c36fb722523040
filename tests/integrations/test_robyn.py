"""Robyn (its own Rust server, so a subprocess): startup loads and follows, ``@scoped``
handlers read one snapshot, ``/readyz`` answers the generation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integrations._support import (
    REPO,
    assert_one_generation,
    free_port,
    get,
    greeting_becomes,
    wait_until,
    write_greeting,
)


def _up(base: str) -> bool:
    try:
        return get(base, "/healthz").status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def robyn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One server for the module (its start is most of the time)."""
    tmp_path = tmp_path_factory.mktemp("robyn")
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    port = free_port()
    log = (tmp_path / "robyn.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.robyn_server"],
        cwd=REPO,
        env={**os.environ, "APP_CONFIG": str(config_file), "PORT": str(port)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Robyn forks its workers: stop the whole group
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _up(base) or process.poll() is not None, 60)
        assert process.poll() is None, (tmp_path / "robyn.log").read_text(errors="replace")
        yield base, config_file
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


def test_robyn_example_serves_a_live_edit(robyn: tuple[str, Path]) -> None:
    base, config_file = robyn
    assert get(base).json() == {"greeting": "hello", "generation": 1}
    assert get(base, "/readyz").json()["generations"] == {"app": 1}
    write_greeting(config_file, "bonjour")
    assert greeting_becomes(base, "bonjour")["generation"] == 2
    assert get(base, "/readyz").json()["configs"]["app"]["watching"] is True


def test_robyn_request_sees_one_generation_across_a_reload(robyn: tuple[str, Path]) -> None:
    base, config_file = robyn
    write_greeting(config_file, "hello")
    greeting_becomes(base, "hello")
    assert_one_generation(get(base, "/during").json(), "hello", "bonjour")
