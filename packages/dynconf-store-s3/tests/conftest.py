"""Fixtures for the s3 store tests; helpers live in ``s3kit`` beside this file.

The shared ``s3_server`` (moto, from ``tests/fixtures/servers.py``) serves most tests. The TLS
and credential-refusal tests start their own moto_server (HTTPS with a private CA; IAM
checks on) from the testenv venv and stop it by its own pid.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from s3kit import OwnMoto, Pki, find_moto_server, make_pki


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, s3_server: Any, tmp_path: Path) -> Any:
    """The AWS chain reduced to static keys in the environment (no profile, no IMDS)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_access_key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return s3_server


@pytest.fixture
def bucket(aws_env: Any) -> str:
    name = f"dynconf-{uuid.uuid4().hex[:12]}"
    aws_env.client.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def moto_binary() -> Path:
    return find_moto_server()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("s3-pki"))


@pytest.fixture
def own_moto(moto_binary: Path, tmp_path: Path) -> Iterator[Any]:
    started: list[OwnMoto] = []

    def make(**kwargs: Any) -> OwnMoto:
        server = OwnMoto(moto_binary, tmp_path / f"moto{len(started)}", **kwargs)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


class Watch:
    """Runs a source's ``changes`` in a thread and collects deliveries and failures."""

    def __init__(self, source: Any, interval: float) -> None:
        import queue

        self.source = source
        self.items: queue.Queue[Any] = queue.Queue()
        self.failures: list[Any] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.watching = threading.Event()
        source.on_failure = self.failures.append
        source.on_watching = self.watching.set
        self.thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self.thread.start()

    def _run(self, interval: float) -> None:
        try:
            for item in self.source.changes(interval, self._stop.is_set):
                self.items.put(item)
        except BaseException as exc:
            self.error = exc

    def next(self, timeout: float = 10.0) -> Any:
        return self.items.get(timeout=timeout)

    def wait_watching(self, timeout: float = 10.0) -> None:
        """Block until the watch has made its first observation (a poll that succeeded)."""
        assert self.watching.wait(timeout), "the watch never completed a poll"

    def quiet(self, seconds: float) -> bool:
        import queue

        try:
            self.items.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.thread.join(timeout)


@pytest.fixture
def watcher() -> Iterator[Any]:
    watches: list[Watch] = []

    def make(source: Any, interval: float = 0.2) -> Watch:
        watch = Watch(source, interval)
        watches.append(watch)
        return watch

    yield make
    for watch in watches:
        watch.stop()
        watch.source.close()
