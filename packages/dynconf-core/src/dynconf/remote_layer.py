"""The remote layer of one configuration: its store, the document last read, what reading saw.

A configuration reads its store only here: once through :func:`dynconf.follow.fetch_once`
or :func:`~dynconf.follow.fetch_once_async` (``init``, ``refresh_remote``), or continuously
through :class:`RemoteWatch`, which runs the shared :class:`~dynconf.follow.Follower` on an
event loop of its own. The document kept is what the next load reads as the remote layer;
a reload is the configuration's business (:mod:`dynconf.lifecycle`).

A source replaced while a read of the old one is in flight must not land: each source set
gets a new generation, and an answer is kept only if its slot is still the current one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from dataclasses import dataclass

import anyio
import anyio.to_thread

from dynconf.errors import DynconfError, MissingError, Origin, RemoteError
from dynconf.follow import (
    AsyncSourceError,
    Follower,
    FollowEvents,
    Slot,
    StoreDriver,
    fetch_once,
    fetch_once_async,
)
from dynconf.lifecycle import Failure
from dynconf.resolve import RemoteDocument
from dynconf.stores import Absent, AsyncRemoteSource, Fetched, RemoteSource

__all__ = ["RemoteLayer", "RemoteStatus", "RemoteWatch"]

log = logging.getLogger("dynconf.engine")


@dataclass(frozen=True, slots=True)
class RemoteStatus:
    """What the remote layer has seen: fetch counts, reachability, the failure streak."""

    fetches: int
    last_fetch: float | None
    last_fetch_duration: float | None
    consecutive_failures: int
    last_failure: Failure | None

    @property
    def reachable(self) -> bool | None:
        if self.last_fetch is None and self.last_failure is None:
            return None
        return self.consecutive_failures == 0


@dataclass
class _RemoteSlot:
    source: RemoteSource | AsyncRemoteSource
    description: str
    document: RemoteDocument | None = None
    generation: int = 0
    fetches: int = 0
    last_fetch: float | None = None
    last_fetch_duration: float | None = None
    consecutive_failures: int = 0
    last_failure: Failure | None = None


class RemoteLayer:
    """The store behind one configuration (or none), and the document last read from it."""

    def __init__(self) -> None:
        self._slot: _RemoteSlot | None = None
        self._generation = 0

    # ------------------------------------------------------------------ the source
    def use(self, source: RemoteSource | AsyncRemoteSource) -> None:
        """Read ``source`` from now on; an answer of the source it replaces is dropped."""
        self._generation += 1
        self._slot = _RemoteSlot(
            source=source, description=source.describe(), generation=self._generation
        )

    @property
    def is_set(self) -> bool:
        return self._slot is not None

    @property
    def unread(self) -> bool:
        """A source is set and has never been read successfully."""
        return self._slot is not None and self._slot.fetches == 0

    @property
    def description(self) -> str | None:
        return None if self._slot is None else self._slot.description

    @property
    def document(self) -> RemoteDocument | None:
        """What the next load reads as the remote layer."""
        return None if self._slot is None else self._slot.document

    def forget(self) -> None:
        """Drop the document kept (the next load reads no remote layer until a read)."""
        if self._slot is not None:
            self._slot.document = None

    def status(self) -> RemoteStatus | None:
        slot = self._slot
        if slot is None:
            return None
        return RemoteStatus(
            fetches=slot.fetches,
            last_fetch=slot.last_fetch,
            last_fetch_duration=slot.last_fetch_duration,
            consecutive_failures=slot.consecutive_failures,
            last_failure=slot.last_failure,
        )

    def _current(self) -> _RemoteSlot:
        if self._slot is None:
            raise MissingError("no remote source is set; call remote(source) first")
        return self._slot

    # ------------------------------------------------------------------ one-shot reads
    def refresh(self) -> None:
        """Read the store now from blocking code and keep the document (no reload)."""
        slot = self._current()
        started = time.perf_counter()
        try:
            answer = fetch_once(slot.source)
        except AsyncSourceError:
            raise AsyncSourceError(
                "this remote source is async; use refresh_remote_async()",
                origin=Origin.remote(slot.description),
            ) from None
        except Exception as exc:
            raise self.failed(slot, exc) from exc
        self.keep(slot, answer, time.perf_counter() - started)

    async def refresh_async(self, executor: Executor | None = None) -> None:
        """Read the store now from the event loop and keep the document (no reload)."""
        slot = self._current()
        started = time.perf_counter()
        try:
            answer = await fetch_once_async(slot.source, executor=executor)
        except Exception as exc:
            raise self.failed(slot, exc) from exc
        self.keep(slot, answer, time.perf_counter() - started)

    # ------------------------------------------------------------------ answers
    def keep(self, slot: _RemoteSlot, answer: Fetched | Absent, took: float | None) -> None:
        """Keep ``answer`` as the document, unless ``slot``'s source was replaced since."""
        if slot.generation != self._generation:
            return  # the source was replaced while this fetch was in flight
        slot.document = (
            None
            if isinstance(answer, Absent)
            else RemoteDocument(
                text=answer.text, format=answer.format, description=slot.description
            )
        )
        slot.fetches += 1
        slot.last_fetch = time.monotonic()
        slot.last_fetch_duration = took
        slot.consecutive_failures = 0

    def moved(self, slot: _RemoteSlot, answer: Fetched | Absent) -> bool:
        """Keep a delivered answer; whether it differs from the document kept before.

        An answer equal to the kept document still confirms it: the store was read
        (``remote_last_fetch_seconds`` restarts), as the agent's staleness does on a resync.
        """
        kept = slot.document
        unchanged = (isinstance(answer, Absent) and kept is None) or (
            isinstance(answer, Fetched)
            and kept is not None
            and (kept.text, kept.format) == (answer.text, answer.format)
        )
        if unchanged:
            if slot.generation == self._generation:
                slot.fetches += 1
                slot.last_fetch = time.monotonic()
                slot.consecutive_failures = 0
            return False
        self.keep(slot, answer, None)
        return True

    def failed(self, slot: _RemoteSlot, error: BaseException) -> DynconfError:
        """Count a failed read; the error as a value-free :class:`DynconfError`."""
        wrapped = (
            error
            if isinstance(error, DynconfError)
            else RemoteError(
                f"{slot.description} could not be read ({type(error).__name__}); check that the "
                "store is reachable",
                origin=Origin.remote(slot.description),
            )
        )
        if wrapped is not error:
            wrapped.__cause__ = error
        slot.consecutive_failures += 1
        slot.last_failure = Failure(wrapped.kind.value, wrapped.path, time.monotonic())
        return wrapped

    # ------------------------------------------------------------------ following
    def follow(
        self,
        interval: float,
        reload: Callable[[], object],
        lock: AbstractContextManager[object],
        key: str,
    ) -> RemoteWatch:
        """Start following the store: a delivery that moved the document calls ``reload``.

        ``lock`` is held while a delivery is compared with the kept document and kept, so a
        load in progress never reads half of it.
        """
        return RemoteWatch(
            self, self._current(), interval, reload=reload, lock=lock, key=key
        ).start()


class RemoteWatch:
    """The thread behind :meth:`DynamicConfig.watch_remote`: the shared follower, on a loop.

    :class:`dynconf.follow.Follower` is the one place that follows a store (the agent, the
    node agent, the config server and ``render --watch`` use it too): the store's own watch,
    a resync every interval for push stores, the catch-up read after a poll watch primes,
    backoff between reopenings. Here it runs on an event loop of its own in one daemon
    thread; each answer it hands over is delivered to the configuration (a reload when the
    document moved).
    """

    def __init__(
        self,
        layer: RemoteLayer,
        slot: _RemoteSlot,
        interval: float,
        *,
        reload: Callable[[], object],
        lock: AbstractContextManager[object],
        key: str,
    ) -> None:
        self._layer = layer
        self._slot = slot
        self._interval = interval
        self._reload = reload
        self._lock = lock
        self._key = key
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dynconf-remote", daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def start(self) -> RemoteWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        anyio.run(self._follow)

    async def _follow(self) -> None:
        from dynconf.remote import AsyncStoreSource, StoreSource

        source = self._slot.source
        # a typed constructor's source builds another client for resyncs (dynconf.follow)
        build = source.another if isinstance(source, StoreSource | AsyncStoreSource) else None
        driver = StoreDriver(source, build=build)
        inbox = Slot()

        async def fetch(kind: str) -> Fetched | Absent:
            try:
                return await driver.read(kind, follower.read_deadline)
            except Exception as exc:
                self.watch_failed(exc)
                raise

        follower = Follower(
            driver, self._interval, inbox, fetch=fetch, events=_RemoteEvents(self), log=log,
            extra={"config": self._key},
        )  # fmt: skip
        kept = self._slot.document
        follower.seen(Fetched(kept.text, kept.format) if kept is not None else None)
        async with anyio.create_task_group() as group:
            group.start_soon(follower.run)
            group.start_soon(self._consume, inbox)
            while not self._stop.is_set():
                await anyio.sleep(0.1)
            group.cancel_scope.cancel()

    async def _consume(self, inbox: Slot) -> None:
        while True:
            delivery = await inbox.take()
            await anyio.to_thread.run_sync(self._deliver, delivery.answer)

    def _deliver(self, answer: Fetched | Absent) -> None:
        """Keep a delivered document and reload, unless it is the one already kept."""
        with self._lock:
            moved = self._layer.moved(self._slot, answer)
        if moved:
            self._reload()

    def watch_failed(self, error: BaseException) -> None:
        self._layer.failed(self._slot, error)


class _RemoteEvents(FollowEvents):
    """A watch that ends in an error counts as a failed read of the remote (its status)."""

    def __init__(self, watch: RemoteWatch) -> None:
        self._watch = watch

    def watch_error(self, error: BaseException) -> None:
        self._watch.watch_failed(error)
