"""A fatal error that reaches the sidecar inside exception groups still ends it with its reason.

Before CPython 3.11.4 (Debian 12's 3.11.2) an exception raised in an ``except*`` clause
leaves wrapped in a group of its own; the loop's fatal error arrives that way there. These
tests build that shape on any Python.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dynconf_k8s.agent.main import _sidecar, first_fatal
from dynconf_k8s.agent.once import AgentFatal


def test_first_fatal_finds_the_error_however_deeply_grouped() -> None:
    fatal = AgentFatal("the document is no longer in the store")
    nested = ExceptionGroup(
        "", [ValueError("x"), ExceptionGroup("", [ExceptionGroup("", [fatal])])]
    )
    assert first_fatal(nested) is fatal
    assert first_fatal(ExceptionGroup("", [ValueError("x")])) is None


def _loop(raised: BaseException) -> Any:
    async def nothing() -> None:
        return None

    async def run() -> None:
        raise raised

    return SimpleNamespace(
        first_fetch=nothing, run=run, events=None, current_lease=lambda: None,
        driver=SimpleNamespace(close=nothing, source=None),
    )  # fmt: skip


def _settings() -> Any:
    return SimpleNamespace(metrics_addr=None, dynamic=False, revoke_on_shutdown=False)


def test_a_grouped_fatal_error_ends_the_sidecar_as_that_error() -> None:
    fatal = AgentFatal("the rendered file was written by something else")
    grouped = ExceptionGroup("", [fatal])  # what `raise` in `except*` leaves on 3.11.2
    with pytest.raises(AgentFatal) as ended:
        anyio.run(_sidecar, _settings(), None, _loop(grouped))
    assert ended.value is fatal


def test_a_group_without_a_fatal_error_is_not_swallowed() -> None:
    with pytest.raises(ExceptionGroup) as ended:
        anyio.run(_sidecar, _settings(), None, _loop(ExceptionGroup("", [ValueError("x")])))
    assert not isinstance(ended.value, AgentFatal)
