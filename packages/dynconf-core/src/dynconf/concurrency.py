"""The one sync/async bridge: where the blocking half of an ``_async`` call runs.

Resolving files, validating, starting a watch and joining its thread are blocking work.
By default they run on anyio's worker threads; an application that sizes its own pools
passes ``executor=`` to :class:`~dynconf.config.DynamicConfig` (or
:class:`~dynconf.group.ConfigGroup`), or sets a process-wide default with
:func:`set_executor`. An executor call cannot be abandoned on cancellation: the work
finishes and its result is dropped.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

import anyio

__all__ = ["executor", "run_blocking", "set_executor"]

T = TypeVar("T")
_default: list[Executor | None] = [None]
"""The process-wide default (a one-slot list: set by :func:`set_executor`)."""


def set_executor(chosen: Executor | None) -> None:
    """The executor every configuration without its own uses (``None``: anyio's pool)."""
    _default[0] = chosen


def executor() -> Executor | None:
    return _default[0]


async def run_blocking(
    function: Callable[..., T], *args: Any, executor: Executor | None = None
) -> T:
    """``function(*args)`` off the event loop, on ``executor`` or the process default."""
    chosen = executor if executor is not None else _default[0]
    if chosen is None:
        return await anyio.to_thread.run_sync(function, *args)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(chosen, functools.partial(function, *args))
