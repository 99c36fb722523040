"""Driving one store client from the loop, whether it blocks or is async.

A blocking source (consul, etcd, redis, vault, the file store, …) fetches in a worker thread
and watches in a daemon thread of its own, handing each document back to the loop; an async
source (nats) runs on the loop. Either way the watch delivers into a :class:`Slot` that keeps
only the newest undelivered document — a burst of changes renders once, as the newest. The
driver does not decide when to reopen a watch or resync; :mod:`dynconf_k8s.agent.loop` does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from dynconf.stores import (
    Absent,
    AsyncRemoteSource,
    Fetched,
    RemoteSource,
    WatchCapability,
    is_async_source,
)

__all__ = ["Delivery", "Slot", "StoreDriver"]

Kind = Literal["first", "delivery", "resync", "reopen"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """One answer from the store, how it arrived, and when (monotonic)."""

    answer: Fetched | Absent
    kind: Kind
    at: float


class Slot:
    """Latest wins: a newer delivery replaces one the loop has not taken yet."""

    def __init__(self) -> None:
        self._item: Delivery | None = None
        self._ready = anyio.Event()

    def put(self, item: Delivery) -> None:
        self._item = item
        self._ready.set()

    def pending(self) -> bool:
        return self._item is not None

    async def take(self) -> Delivery:
        while self._item is None:
            await self._ready.wait()
            if self._item is None:
                self._ready = anyio.Event()
        item, self._item = self._item, None
        self._ready = anyio.Event()
        return item


class StoreDriver:
    """One built source, with fetch and watch callable from the event loop."""

    def __init__(self, source: RemoteSource | AsyncRemoteSource) -> None:
        self.source = source
        self.is_async = is_async_source(source)
        self.capability: WatchCapability = source.capability
        self.reports_watching = hasattr(source, "on_watching")
        """The source says when its watch is up or a poll succeeded (``on_watching``)."""

    def describe(self) -> str:
        return self.source.describe()

    def set_hooks(
        self, on_failure: Callable[[BaseException], None], on_watching: Callable[[], None]
    ) -> None:
        """Install the watch-health hooks the store contract names (``stores.py``)."""
        for name, hook in (("on_failure", on_failure), ("on_watching", on_watching)):
            try:
                setattr(self.source, name, hook)
            except AttributeError:  # a slotted source without the hook: it reports nothing
                continue

    def connected(self) -> bool | None:
        """The source's own view of its stream, when it keeps one (``connected``)."""
        value = getattr(self.source, "connected", None)
        return value if isinstance(value, bool) else None

    async def fetch(self) -> Fetched | Absent:
        if self.is_async:
            source_async: AsyncRemoteSource = self.source  # type: ignore[assignment]
            return await source_async.fetch()
        source: RemoteSource = self.source  # type: ignore[assignment]
        return await anyio.to_thread.run_sync(source.fetch, abandon_on_cancel=True)

    async def watch(self, interval: float, deliver: Callable[[Delivery], None]) -> None:
        """Run the store's ``changes`` until it ends; raises what it raised."""
        if self.is_async:
            source_async: AsyncRemoteSource = self.source  # type: ignore[assignment]
            async for answer in source_async.changes(interval):
                deliver(Delivery(answer, "delivery", time.monotonic()))
            return
        await self._watch_blocking(interval, deliver)

    async def _watch_blocking(self, interval: float, deliver: Callable[[Delivery], None]) -> None:
        source: RemoteSource = self.source  # type: ignore[assignment]
        token = anyio.lowlevel.current_token()
        stop = threading.Event()
        done = anyio.Event()
        outcome: list[BaseException] = []

        def hand_over(answer: Fetched | Absent) -> None:
            anyio.from_thread.run_sync(
                deliver, Delivery(answer, "delivery", time.monotonic()), token=token
            )

        def run() -> None:
            try:
                for answer in source.changes(interval, stop.is_set):
                    if stop.is_set():
                        break
                    hand_over(answer)
            except RuntimeError:
                return  # the loop is gone (shutdown): nothing to hand over to
            except BaseException as error:
                outcome.append(error)
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:
                return

        # a daemon thread, so a store client stuck in a long poll never holds up exit
        thread = threading.Thread(target=run, name="dynconf-agent-watch", daemon=True)
        thread.start()
        try:
            await done.wait()
        finally:
            stop.set()
        if outcome:
            raise outcome[0]

    async def close(self) -> None:
        if self.is_async:
            source_async: AsyncRemoteSource = self.source  # type: ignore[assignment]
            with anyio.move_on_after(2):
                await source_async.aclose()
            return
        source: RemoteSource = self.source  # type: ignore[assignment]
        with anyio.move_on_after(2):
            await anyio.to_thread.run_sync(source.close, abandon_on_cancel=True)
