"""Run ``dynamic-config-agent`` as the cluster does — a real subprocess — and read it back.

:class:`AgentProcess` starts the console script, follows its JSON log lines, finds the metrics
port from the ``metrics_serving`` line, scrapes ``/metrics`` with prometheus-client's parser and
stops the process with SIGTERM (every process a test starts is stopped by its own pid).
:class:`CutProxy` is a loopback TCP forwarder a test can cut and restore, which is how a store
"restarts" under a running agent without disturbing the session's shared server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.relay import Relay, relay_factory

AGENT = Path(sys.executable).with_name("dynamic-config-agent")
DEADLINE = 20.0


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = DEADLINE,
    what: str | Callable[[], str] = "",
) -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout``.

    ``what`` names the wait in the failure; a callable is asked only then, so it can say
    what the last probe saw.
    """
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            said = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {said or predicate}")
        time.sleep(0.05)


class AgentProcess:
    """One agent subprocess with its log lines and metrics port."""

    def __init__(self, args: list[str], env: dict[str, str | None] | None = None) -> None:
        """``env`` adds to this process's environment; a ``None`` value removes the name."""
        full_env = {**os.environ}
        for name, value in (env or {}).items():
            if value is None:
                full_env.pop(name, None)
            else:
                full_env[name] = value
        if "DYNCONF_PLUGIN_LOCK" not in (env or {}):
            full_env.pop("DYNCONF_PLUGIN_LOCK", None)
        self.args = args
        self.proc = subprocess.Popen(
            [str(AGENT), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port: int | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            with contextlib.suppress(json.JSONDecodeError):
                self.lines.append(json.loads(line))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("event") == name]

    def wait_event(self, name: str, count: int = 1, timeout: float = DEADLINE) -> dict[str, Any]:
        found = wait_for(
            lambda: len(self.events(name)) >= count or self.proc.poll() is not None,
            timeout,
            f"log event {name!r} x{count}",
        )
        del found
        hits = self.events(name)
        assert len(hits) >= count, (
            f"agent exited ({self.proc.returncode}) before {name}: {self.raw}"
        )
        return hits[count - 1]

    def wait_port(self) -> int:
        if self.port is None:
            line = self.wait_event("metrics_serving")
            self.port = int(line["address"].rpartition(":")[2])
        return self.port

    def get(self, path: str, body: bytes | None = None) -> tuple[int, str]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.wait_port()}{path}",
            data=body,
            method="POST" if body is not None else "GET",
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def scrape(self) -> dict[str, float]:
        """Every sample of ``/metrics`` by name (labels folded in for histogram buckets)."""
        status, text = self.get("/metrics")
        assert status == 200
        samples: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                if sample.labels:
                    name += "{" + ",".join(f"{k}={v}" for k, v in sample.labels.items()) + "}"
                samples[name] = sample.value
        return samples

    def metric(self, name: str) -> float:
        return self.scrape()[f"dynamic_config_agent_{name}"]

    def wait_metric(
        self, name: str, check: Callable[[float], bool], timeout: float = DEADLINE
    ) -> float:
        return self._wait_metric(name, check, timeout)

    def _wait_metric(self, name: str, check: Callable[[float], bool], timeout: float) -> float:
        box: list[float] = []

        def probe() -> bool:
            value = self.metric(name)
            box.append(value)
            return check(value)

        wait_for(probe, timeout, lambda: f"{name} (last {box[-1:] or 'none'})")
        return box[-1]

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._reader.join(timeout=5)
        return self.proc.returncode

    @property
    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


@pytest.fixture
def agent() -> Iterator[Callable[..., AgentProcess]]:
    """Start agents; every one is stopped (SIGTERM, then kill) at the end of the test."""
    started: list[AgentProcess] = []

    def start(*args: str, env: dict[str, str | None] | None = None) -> AgentProcess:
        process = AgentProcess(list(args), env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
        # pytest shows this only for a failed test: the agent's own account of it
        print(f"agent {process.args[:2]} exited {process.proc.returncode}; its log:")
        print("".join(process.raw[-200:]), end="")


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def wait_file(path: Path, check: Callable[[str], bool], timeout: float = DEADLINE) -> str:
    box: list[str] = []

    def probe() -> bool:
        text = read(path)
        if text is None:
            return False
        box.append(text)
        return check(text)

    wait_for(probe, timeout, lambda: f"{path} to satisfy the check (last {box[-1:]!r})")
    return box[-1]


@pytest.fixture
def cut_proxy() -> Iterator[Callable[[str, int], Relay]]:
    """``cut_proxy(host, port)``: a relay to a store the test cuts off and restores."""
    with relay_factory() as make:
        yield lambda host, port: make(port, host)
