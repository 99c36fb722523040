"""Firestore emulators for these tests: the shared session one, and one the fault test owns.

The shared ``firestore_server`` (``tests/fixtures/servers.py``) must not be killed, so the
restart test starts its own official emulator from the same jar on a fixed loopback port and
stops it by its own pid.
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
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from dynconf.stores import Absent, Fetched, StoreSpec
from dynconf_store_firestore.plugin import FIRESTORE_STORE
from dynconf_store_firestore.source import FirestoreSource

JAR = Path(
    "/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
)
MAIN = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"


@pytest.fixture
def doc_path() -> str:
    return f"config/{uuid.uuid4().hex}"


@pytest.fixture
def make_source(firestore_server) -> Callable[..., FirestoreSource]:
    built: list[FirestoreSource] = []

    def make(key: str, *, host: str | None = None, project: str | None = None,
             **fields: Any) -> FirestoreSource:  # fmt: skip
        spec = StoreSpec.from_inputs(
            source="firestore",
            endpoint=project or firestore_server.project,
            key=key,
            **{"auth": "emulator", "api_url": host or firestore_server.emulator_host, **fields},
        )
        source = FIRESTORE_STORE.build(spec)
        built.append(source)
        return source

    yield make
    for source in built:
        source.close()


class Watcher:
    """Runs ``source.changes`` on a thread and hands deliveries to the test through a queue."""

    def __init__(self, source: FirestoreSource, interval: float = 1.0) -> None:
        self.source = source
        self.items: queue.Queue[Fetched | Absent] = queue.Queue()
        self.failures: list[Exception] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        source.on_failure = self.failures.append
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self.thread.start()

    def _run(self, interval: float) -> None:
        try:
            for item in self.source.changes(interval, self._stop.is_set):
                self.items.put(item)
        except BaseException as exc:
            self.error = exc

    def wait_connected(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not self.source.connected:
            assert self.error is None, self.error
            assert time.monotonic() < deadline, "the listener never delivered its first snapshot"
            time.sleep(0.05)

    def next(self, timeout: float = 15) -> Fetched | Absent:
        return self.items.get(timeout=timeout)

    def quiet(self, seconds: float) -> bool:
        try:
            self.items.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive()


@pytest.fixture
def watcher() -> Iterator[Callable[..., Watcher]]:
    started: list[Watcher] = []

    def start(source: FirestoreSource, interval: float = 1.0) -> Watcher:
        watch = Watcher(source, interval)
        started.append(watch)
        return watch

    yield start
    for watch in started:
        watch._stop.set()
        watch.thread.join(10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class OwnEmulator:
    """An emulator this test may kill and restart on the same port (data is in memory)."""

    def __init__(self, directory: Path, java: str) -> None:
        self.port = _free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.directory = directory
        self.java = java
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.directory / "emulator.log").open("ab")
        self.process = subprocess.Popen(
            [self.java, "-Duser.language=en", "-cp", str(JAR), MAIN, "start", "--host=127.0.0.1",
             f"--port={self.port}"],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.directory,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://{self.host}/", timeout=1).close()
                return
            assert self.process.poll() is None, "the emulator exited while starting"
            time.sleep(0.1)
        raise AssertionError("the emulator did not start within 90 s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def client(self, project: str) -> Any:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import firestore

        client = firestore.Client(project=project, credentials=AnonymousCredentials())
        client._emulator_host = self.host
        return client


def _unavailable(reason: str) -> NoReturn:
    """Fail in CI, where the emulator must run; skip elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def own_emulator(tmp_path: Path, firestore_server: Any) -> Iterator[OwnEmulator]:
    if not JAR.is_file():
        _unavailable(f"the Firestore emulator is not installed at {JAR}")
    # the Java the testenv runs the shared emulator with (the machine's, or one it bootstrapped);
    # PATH's only when the server's published values name none
    java = firestore_server.java or shutil.which("java")
    if java is None:
        _unavailable("no Java runtime: the testenv published none and none is on PATH")
    emulator = OwnEmulator(tmp_path, java)
    emulator.start()
    try:
        yield emulator
    finally:
        emulator.kill()
