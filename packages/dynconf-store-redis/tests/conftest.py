"""Helpers for the redis store tests: a watch driver, private redis servers, a cuttable proxy.

The session server (``redis_server``) comes from ``tests/fixtures/servers.py``. Tests that
kill a server, or need a configuration the session server does not have (requirepass,
notifications off, client certificates required), start a private redis-server from the
binaries ``scripts/testenv`` installed, so the shared server is never disturbed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_redis import REDIS_STORE
from dynconf_store_redis.source import RedisSource
from tests.fixtures.relay import Relay, relay_factory
from tests.fixtures.watch import WatchDriver, free_port

CACHE = Path(os.environ.get("DYNCONF_TESTENV_CACHE", Path.home() / ".cache" / "dynconf-testenv"))
REDIS_ROOT = CACHE / "debs" / "redis"


def build(endpoint: str, key: str, **fields: Any) -> RedisSource:
    spec = StoreSpec.from_inputs(source="redis", endpoint=endpoint, key=key, **fields)
    refusals = REDIS_STORE.validate(spec)
    assert refusals == [], refusals
    return REDIS_STORE.build(spec)


Watch = WatchDriver
"""The shared driver under the name these tests use."""


@dataclass
class PrivateRedis:
    """A redis-server this test owns (append-only file on, so a kill keeps the data)."""

    data: Path
    extra: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        argv = [
            str(REDIS_ROOT / "usr/bin/redis-server"), "--bind", "127.0.0.1",
            "--port", str(self.port), "--dir", str(self.data), "--save", "",
            "--appendonly", "yes", "--appendfsync", "always",
            "--notify-keyspace-events", "KEA", *self.extra,
        ]  # fmt: skip
        env = {**os.environ, "LD_LIBRARY_PATH": str(REDIS_ROOT / "usr/lib/x86_64-linux-gnu")}
        self.process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the private redis did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Callable[..., PrivateRedis]]:
    """A factory of private redis servers, all killed at the end of the test."""
    if not (REDIS_ROOT / "usr/bin/redis-server").exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis is not installed; run scripts/testenv install redis")
        pytest.skip("redis is not installed; run scripts/testenv install redis")
    started: list[PrivateRedis] = []

    def start(**options: Any) -> PrivateRedis:
        server = PrivateRedis(data=tmp_path / f"redis{len(started)}", **options)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.kill()
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture
def proxy() -> Iterator[Callable[..., Relay]]:
    """Relays that cut the watcher's path to a private server while it stays up."""
    with relay_factory() as make:
        yield make


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (importlib mode cannot import a conftest)."""
    return SimpleNamespace(build=build, Watch=Watch, free_port=free_port, TlsSettings=TlsSettings)
