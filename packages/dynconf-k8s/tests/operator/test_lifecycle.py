"""``Operator.stop`` ends every thread ``start`` made, against the real API server.

A watch thread that outlived its operator kept reading the API server after the test (and the
session) had moved on, and died on the closed socket with an ``AttributeError`` traceback or
logged into streams pytest had closed.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dynconf_k8s.operator.manager import Operator


def _started_by(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())


@pytest.mark.timeout(120)
def test_stop_returns_with_no_thread_of_the_operator_left(
    operator_api: Any, operator_crds: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashes: list[str] = []
    monkeypatch.setattr(
        threading, "excepthook", lambda args: crashes.append(f"{args.thread}: {args.exc_value!r}")
    )
    for _ in range(10):  # each round stops watches that opened a moment before
        before = set(threading.enumerate())
        running = Operator(operator_api, identity="test-lifecycle", workers=2)
        running.start()
        running.stop()
        assert _started_by(before) == []
    assert crashes == []
