"""Helpers for the redis store tests: a watch driver, private redis servers, a cuttable proxy.

The session server (``redis_server``) comes from ``tests/fixtures/servers.py``. Tests that
kill a server, or need a configuration the session server does not have (requirepass,
notifications off, client certificates required), start a private redis-server from the
binaries ``scripts/testenv`` installed, so the shared server is never disturbed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.stores import Absent, Fetched, StoreSpec, TlsSettings
from dynconf_store_redis import REDIS_STORE
from dynconf_store_redis.source import RedisSource

CACHE = Path(os.environ.get("DYNCONF_TESTENV_CACHE", Path.home() / ".cache" / "dynconf-testenv"))
REDIS_ROOT = CACHE / "debs" / "redis"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build(endpoint: str, key: str, **fields: Any) -> RedisSource:
    spec = StoreSpec(source="redis", endpoint=endpoint, key=key, **fields)
    refusals = REDIS_STORE.validate(spec)
    assert refusals == [], refusals
    return REDIS_STORE.build(spec)


class Watch:
    """Drives ``source.changes`` on a thread; answers and the raised error land in a queue."""

    def __init__(self, source: RedisSource, interval: float = 30.0) -> None:
        self.source = source
        self.stop = threading.Event()
        self.answers: queue.Queue[Fetched | Absent | BaseException] = queue.Queue()
        self.watching = threading.Semaphore(0)
        self.failures: list[Exception] = []
        source.on_watching = self.watching.release
        source.on_failure = self.failures.append
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval: float) -> None:
        try:
            for answer in self.source.changes(interval, self.stop.is_set):
                self.answers.put(answer)
        except BaseException as exc:
            self.answers.put(exc)

    def __enter__(self) -> Watch:
        self.thread.start()
        self.wait_watching()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        self.source.close()

    def wait_watching(self, timeout: float = 15.0) -> None:
        assert self.watching.acquire(timeout=timeout), "the watch was not established in time"

    def next(self, timeout: float = 10.0) -> Fetched | Absent:
        answer = self.answers.get(timeout=timeout)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def quiet(self, seconds: float = 0.6) -> bool:
        try:
            self.answers.get(timeout=seconds)
        except queue.Empty:
            return True
        return False


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


class Proxy:
    """A loopback TCP proxy that can cut every connection and refuse new ones, then resume.

    The fault a single real server cannot produce on its own: the server stays up (so a
    change can be written while the watcher cannot reach it) while the watcher's path to it
    is gone.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.resume()

    def resume(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):  # shutdown wakes the blocked accept()
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def proxy() -> Iterator[Callable[[int], Proxy]]:
    made: list[Proxy] = []

    def make(upstream_port: int) -> Proxy:
        made.append(Proxy(upstream_port))
        return made[-1]

    yield make
    for item in made:
        item.cut()


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers above, for test modules (importlib mode cannot import a conftest)."""
    return SimpleNamespace(build=build, Watch=Watch, free_port=free_port, TlsSettings=TlsSettings)
