"""The one freshness scenario's parts: the agent behind a relay, its clock, its file.

``WATCH`` is the agent's ``--watch``; :data:`BOUND` is how long a change may take to reach
the file when the watch stream cannot deliver it (a resync confirms the document at least
every ``WATCH`` seconds; the book's bound is about two of them, plus slack for a busy
machine).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fixtures.eventually import eventually
from tests.fixtures.relay import Relay

Start = Callable[..., Any]
"""The ``agent`` fixture (``packages/dynconf-k8s/tests/agent/conftest.py``)."""

WATCH = 2
BOUND = 2 * WATCH + 3
"""Seconds from a write to the file while the watch's connection forwards nothing."""
MAX_STALENESS = 2 * WATCH
"""``--max-staleness``: past it ``/readyz`` answers 503 (docs/behaviour.md, Max staleness)."""
START = 30.0
"""Seconds for the agent's first render (a first gRPC channel to the emulator is slow)."""


def start_agent(agent: Start, harness: Any, relay: Relay, out: Path) -> Any:
    """The sidecar as the agent tests start it, on the store through ``relay``."""
    endpoint, args = harness.via(relay)
    env: dict[str, str | None] = {**harness.env}
    if harness.token:
        env["DYNAMIC_CONFIG_AGENT_TOKEN"] = harness.token
    return agent(
        "--source", harness.name, "--endpoint", endpoint, "--key", harness.key,
        "--out", str(out), "--watch", str(WATCH), "--metrics-addr", "127.0.0.1:0",
        "--max-staleness", str(MAX_STALENESS), *args, env=env,
    )  # fmt: skip


def holds(out: Path, version: object) -> Callable[[], bool]:
    """Whether the rendered file is the document ``{"v": version}``."""

    def check() -> bool:
        try:
            return bool(json.loads(out.read_text()) == {"v": version})
        except (OSError, ValueError):
            return False

    return check


def write_and_time(harness: Any, out: Path, version: object, timeout: float) -> float | None:
    """Write ``{"v": version}``; seconds until the file holds it, or None past ``timeout``."""
    began = time.monotonic()
    harness.put({"v": version})
    if not eventually(holds(out, version), timeout, interval=0.02):
        return None
    return round(time.monotonic() - began, 3)


def last_text(out: Path) -> str:
    try:
        return out.read_text()
    except OSError as error:
        return f"<{error}>"
