"""The one sync/async bridge: where the blocking half of an ``_async`` call runs.

Resolving files, validating, starting a watch and joining its thread are blocking work.
By default they run on anyio's worker threads; an application that sizes its own pools
passes ``executor=`` to :class:`~dynconf.config.DynamicConfig` (or
:class:`~dynconf.group.ConfigGroup`), or sets a process-wide default with
:func:`set_executor`. An executor call cannot be abandoned on cancellation: the work
finishes and its result is dropped.

The other direction, a store's own thread handing something to the loop, goes through
:func:`call_soon_in_loop`: it schedules and returns, so a thread never waits on a loop that
may already be shutting down (a blocking ``anyio.from_thread.run_sync`` issued just as
the loop stops is never run, and holds its thread for the life of the process).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from contextvars import ContextVar
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

_library_cvar: ContextVar[str | None] | None
try:  # anyio detects its library through sniffio when sniffio is installed
    from sniffio import current_async_library_cvar as _library_cvar
except ImportError:  # pragma: no cover - anyio then detects asyncio by its running loop
    _library_cvar = None

__all__ = ["call_soon_in_loop", "executor", "run_blocking", "set_executor"]

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


def call_soon_in_loop(
    token: anyio.lowlevel.EventLoopToken, function: Callable[..., object], *args: Any
) -> bool:
    """Any thread: run ``function(*args)`` soon on ``token``'s loop, without waiting for it.

    Calls made this way run in the order they were made. ``False``: the loop is closed,
    and nobody is left to run the call.
    """
    native = token.native_token
    if isinstance(native, asyncio.AbstractEventLoop):

        def in_loop() -> None:
            # a bare loop callback has no task, so anyio's and sniffio's detection would
            # fail inside ``function``: name the library, as anyio's own bridge does
            if _library_cvar is None:
                function(*args)
                return
            mark = _library_cvar.set("asyncio")
            try:
                function(*args)
            finally:
                _library_cvar.reset(mark)

        try:
            native.call_soon_threadsafe(in_loop)
        except RuntimeError:
            return False
        return True
    try:  # trio: its token schedules the same way
        native.run_sync_soon(function, *args)  # type: ignore[attr-defined]
    except RuntimeError:
        return False
    return True
