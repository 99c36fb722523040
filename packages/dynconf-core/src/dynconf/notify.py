"""How installs and refusals reach asyncio code: streams, events and async hooks.

An install happens on whichever thread reloaded (the file watcher's, the remote follower's,
a caller's). Nothing here ever makes that thread wait for the event loop: every hand-over is
one ``loop.call_soon_threadsafe`` and the reload moves on, so reload latency and callback
latency stay two separate numbers.

Backpressure is stated, not accidental:

* a stream (:meth:`DynamicConfig.changes`, :meth:`DynamicConfig.events`) delivers every
  item in order, holding at most ``buffer`` undelivered ones; when a slow consumer lets more
  pile up, the *oldest* waiting are dropped, so the newest is always delivered;
* an async hook follows its :class:`Backpressure` policy (``latest`` by default: while a
  call runs, only the newest install waits to run next).

Events carry paths, kinds, counts and times, never a value from the document.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Generic, TypeVar

__all__ = [
    "DEFAULT_BUFFER",
    "AsyncHook",
    "Backpressure",
    "Broadcast",
    "ConfigEvent",
    "ReloadFailed",
    "Reloaded",
    "Stream",
    "running_loop",
]

T = TypeVar("T")
log = logging.getLogger("dynconf.engine")

DEFAULT_BUFFER: Final = 64
"""Undelivered items a stream holds before it drops the oldest."""


@dataclass(frozen=True, slots=True)
class ConfigEvent:
    """One thing that happened to a configuration; ``at`` is a Unix time in seconds."""

    generation: int
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class Reloaded(ConfigEvent):
    """A snapshot was installed: why, and which leaf paths moved (empty on the first)."""

    reason: str = "manual"
    changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReloadFailed(ConfigEvent):
    """A reload was refused and the previous snapshot keeps serving.

    ``consecutive`` is the refusal streak, the number an alert is written against.
    """

    kind: str = "backend"
    path: str = ""
    consecutive: int = 1


class Backpressure(StrEnum):
    """What an async hook does when installs arrive faster than it finishes."""

    LATEST = "latest"
    """While a call runs, keep only the newest install and run it next (the default)."""
    SERIAL = "serial"
    """Run every install, one at a time, in order."""
    EVERY = "every"
    """Start a call for every install as it arrives, concurrently."""
    CANCEL_PREVIOUS = "cancel_previous"
    """A new install cancels the call still running, then starts its own."""

    @classmethod
    def _missing_(cls, value: object) -> Backpressure:
        names = ", ".join(repr(member.value) for member in cls)
        raise ValueError(f"{value!r} is not a backpressure policy; use one of {names}")


def running_loop(what: str) -> asyncio.AbstractEventLoop:
    """The caller's asyncio loop, or a one-line error saying ``what`` needs one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            f"{what} needs a running asyncio event loop; call it from async code "
            "(inside asyncio.run or a framework's lifespan)"
        ) from None


class _Subscription(Generic[T]):
    """One consumer on one loop: a bounded buffer filled from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, buffer: int) -> None:
        self.loop = loop
        self.items: collections.deque[T] = collections.deque(maxlen=buffer)
        self.dropped = 0
        self.waiter: asyncio.Future[None] | None = None
        self.closed = False

    def push(self, item: T) -> None:
        """Any thread: hand ``item`` to the loop and return at once."""
        try:
            self.loop.call_soon_threadsafe(self._arrive, item)
        except RuntimeError:  # the loop is closed; nobody is listening any more
            self.closed = True

    def _arrive(self, item: T) -> None:
        if len(self.items) == self.items.maxlen:
            self.dropped += 1
        self.items.append(item)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def get(self) -> T:
        while not self.items:
            self.waiter = self.loop.create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.items.popleft()


class Stream(AsyncIterator[T]):
    """What ``changes()`` and ``events()`` return: an async iterator over one subscription.

    ``aclose()`` (or ``async with contextlib.aclosing(...)``) ends the subscription at once;
    a stream that is simply dropped ends it when it is garbage-collected.
    """

    def __init__(self, broadcast: Broadcast[T], subscription: _Subscription[T]) -> None:
        self._broadcast = broadcast
        self._subscription: _Subscription[T] | None = subscription

    def __aiter__(self) -> Stream[T]:
        return self

    async def __anext__(self) -> T:
        subscription = self._subscription
        if subscription is None:
            raise StopAsyncIteration
        return await subscription.get()

    async def aclose(self) -> None:
        if self._subscription is not None:
            self._broadcast.remove(self._subscription)
            self._subscription = None


class Broadcast(Generic[T]):
    """Every live subscription of one configuration to one kind of item.

    Subscriptions are held weakly: only their :class:`Stream` keeps them alive.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: weakref.WeakSet[_Subscription[T]] = weakref.WeakSet()

    def __bool__(self) -> bool:
        return len(self._subscriptions) > 0

    def publish(self, item: T) -> None:
        with self._lock:
            subscriptions = list(self._subscriptions)
        for subscription in subscriptions:
            subscription.push(item)
            if subscription.closed:
                self.remove(subscription)

    def remove(self, subscription: _Subscription[T]) -> None:
        with self._lock:
            self._subscriptions.discard(subscription)

    def stream(self, what: str, buffer: int) -> Stream[T]:
        """Every item published from the call on (see the module's backpressure rule).

        The subscription starts here, not at the first ``anext``, so nothing published
        between the call and the first read is missed.
        """
        if buffer < 1:
            raise ValueError(f"{what} needs a buffer of at least 1, not {buffer}")
        subscription: _Subscription[T] = _Subscription(running_loop(what), buffer)
        with self._lock:
            self._subscriptions.add(subscription)
        return Stream(self, subscription)


class AsyncHook:
    """A coroutine hook, run as tasks on the loop it was registered from.

    Calling it (from the installing thread) schedules and returns; the policy decides what
    happens when installs outrun the hook. An exception goes to the loop's exception
    handler; the hook stays registered.
    """

    def __init__(
        self,
        hook: Callable[[Any, Any], Awaitable[None]],
        policy: Backpressure | str = Backpressure.LATEST,
        *,
        what: str = "on_reload_async",
    ) -> None:
        if not inspect.iscoroutinefunction(hook):
            name = getattr(hook, "__name__", type(hook).__name__)
            raise TypeError(
                f"{what} takes a coroutine function (async def); {name!r} is not one — "
                "use on_reload for a plain function"
            )
        self.hook = hook
        self.policy = Backpressure(policy)
        self.loop = running_loop(what)
        self._running: asyncio.Task[None] | None = None
        self._pending: collections.deque[tuple[Any, Any]] = collections.deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def __call__(self, old: Any, new: Any) -> None:
        if self.closed:
            return
        try:
            self.loop.call_soon_threadsafe(self._submit, old, new)
        except RuntimeError:  # the loop has closed: the hook has nowhere to run
            self.closed = True

    def _submit(self, old: Any, new: Any) -> None:
        policy = self.policy
        if policy is Backpressure.EVERY:
            self._start(old, new)
        elif policy is Backpressure.CANCEL_PREVIOUS:
            if self._running is not None:
                self._running.cancel()
            self._start(old, new)
        elif self._running is None:
            self._start(old, new)
        elif policy is Backpressure.SERIAL:
            self._pending.append((old, new))
        else:  # LATEST: the waiting call keeps its ``old`` and takes the newest ``new``
            first_old = self._pending[0][0] if self._pending else old
            self._pending.clear()
            self._pending.append((first_old, new))

    def _start(self, old: Any, new: Any) -> None:
        task = self.loop.create_task(self._run(old, new))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._running = task

    async def _run(self, old: Any, new: Any) -> None:
        me = asyncio.current_task()
        try:
            await self.hook(old, new)
        except asyncio.CancelledError:
            if self.policy is not Backpressure.CANCEL_PREVIOUS:
                raise
        except Exception as error:
            self.loop.call_exception_handler(
                {"message": "dynconf: an async reload hook raised", "exception": error}
            )
        finally:
            if self._running is me:
                self._running = None
                if self._pending:
                    self._start(*self._pending.popleft())
