"""Following one store: the one place that opens a watch, primes it, catches up and reopens.

Every store's ``changes`` primes silently on its first observation: it records what the store
holds and delivers nothing for it. Whoever read the store before the watch opened (a first
render, a read before a reopen) therefore loses any change made between that read and the
prime, unless someone reads again. The rule, written once here for every follower (the
sidecar agent, the node agent, ``dynconf render --watch``):

* a **push** store is *confirmed* by a read at least every interval, whatever its stream
  says: when neither a read nor a delivered change confirmed the document within the last
  interval, it is re-read (a *resync*). A stream that is open and forwards nothing looks
  exactly like a quiet one; only a read tells them apart. The resync goes over a client of
  its own, built for that read and closed after it (:meth:`StoreDriver.fetch_apart`), so it
  never waits on the connection whose health it is checking, and it is bounded in time
  (:data:`READ_DEADLINE_FLOOR`), so a black-holed connection cannot hang it. A push store is
  also re-read once before each reopened watch;
* when a resync finds a change the watch did not deliver, the watch is *stalled*: it is
  logged (``watch_stalled``), counted, and the watch is reopened on a fresh client when the
  driver can build one (its old client is closed, which frees a thread stuck on a dead
  connection);
* a **poll** store (conditional / interval), and a push store that reports its stream up,
  is read once more *after* each watch's first observation (a *catch-up*; the source
  reports it through ``on_watching``): that closes the window before the prime;
* when a catch-up or a resync finds a change the watch did not deliver, the watch's marker
  (what its source compares each observation with) may hold something the consumer no
  longer has, so the watch is *realigned*: reopened to prime on the store as it is now, and
  caught up again. Without that a change back to the marker's value is never delivered:
  a Consul watch primed on ``v1``, the key deleted (the catch-up delivers ABSENT) and
  written back as ``v1`` before the next blocking query, answers ``v1`` — its marker — and
  stays silent while the consumer holds ABSENT;
* until a first read succeeds (the store was down at start), the store is read on a backoff.

:class:`StoreDriver` drives one built source from the loop whether it blocks (fetch in a
worker thread, watch in a daemon thread) or is async (on the loop). Every answer lands in a
:class:`Slot`, which keeps only the newest undelivered one — a burst renders once, as the
newest. What the consumer does with it is the consumer's business.

A *one-shot* read (``DynamicConfig.init`` and ``refresh_remote``, the operator's render) goes
through :func:`fetch_once` or :func:`fetch_once_async`, so "is this source async?" is asked
here and nowhere else.

Every read made here is also admitted and counted here, once, for every store: through the
:class:`~dynconf.budget.StoreCalls` of its store and endpoint (the process's budget, a store's
Retry-After, the ``*_store_requests_total`` counts). A watch's own requests happen inside the
store's ``changes``; they are counted as the store reports them (``on_watching``: one answered
call, ``on_failure``: one failed call), and a blocking store's watch thread waits out the
budget in those hooks before its next request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, cast

from dynconf.budget import BudgetExceeded, StoreCalls, ledger
from dynconf.errors import BackendError, DynconfError, Origin
from dynconf.stores import (
    Absent,
    AsyncRemoteSource,
    Fetched,
    Pace,
    RemoteSource,
    WatchCapability,
    is_async_source,
    same_document,
)

if TYPE_CHECKING:
    import anyio
    import anyio.lowlevel
    from anyio.abc import TaskGroup

# anyio (and asyncio under it) is imported by the code that runs on a loop, not here: the one
# blocking read (``fetch_once`` of a blocking source, the init agent's whole job) needs no
# event loop, and importing one is a quarter of that process's start.

__all__ = [
    "HANDOFF_GRACE",
    "READ_DEADLINE_FLOOR",
    "STALL_GRACE",
    "AsyncSourceError",
    "Delivery",
    "FollowEvents",
    "Follower",
    "Slot",
    "StoreDriver",
    "calls_of",
    "fetch_once",
    "fetch_once_async",
]

Answer = Fetched | Absent
Kind = Literal["first", "delivery", "resync", "reopen", "catch_up", "join", "rebuild"]

_log = logging.getLogger("dynconf.follow")

HANDOFF_GRACE: Final = 0.01
"""Seconds a blocking watch waits after handing a change to the loop, before it asks the
store again. Building the next request (a blocking query through requests) is a millisecond
or two of Python holding the GIL, which the render of the change just handed over would
otherwise wait out: a third of a Consul change's way to the file. A change made meanwhile is
not lost (the next request answers it at once) and waits at most this long."""

READ_DEADLINE_FLOOR: Final = 5.0
"""Seconds a resync read may take at least; the interval when longer. A read past its
deadline failed (logged and counted like any failed read): a connection that accepts and
forwards nothing would otherwise hold the resync, and every one after it, forever."""

STALL_GRACE: Final = 1.0
"""Seconds a resync that found a change waits for the watch to deliver the same before it
calls the watch stalled (half the interval when shorter)."""

Source = RemoteSource | AsyncRemoteSource


def reason_of(error: BaseException) -> str:
    """A failure as one value-free line: the engine's sentence, or the exception's kind.

    An ImportError says which module or shared library is missing (a name, never a value), and
    without that the line would read only "ImportError": an image that lacks a store client's
    system library is then undiagnosable from the log.
    """
    if isinstance(error, DynconfError):
        return str(error)
    if isinstance(error, ImportError):
        return (
            f"a library the store client needs could not be loaded ({error}); the image or "
            "environment lacks it"
        )
    return type(error).__name__


@dataclass(frozen=True, slots=True)
class Delivery:
    """One answer from the store, how it arrived, and when (monotonic)."""

    answer: Answer
    kind: Kind
    at: float


class Slot:
    """Latest wins: a newer delivery replaces one the consumer has not taken yet."""

    def __init__(self) -> None:
        import anyio

        self._item: Delivery | None = None
        self._ready = anyio.Event()

    def put(self, item: Delivery) -> None:
        self._item = item
        self._ready.set()

    def pending(self) -> bool:
        return self._item is not None

    async def take(self) -> Delivery:
        import anyio

        while self._item is None:
            await self._ready.wait()
            if self._item is None:
                self._ready = anyio.Event()
        item, self._item = self._item, None
        self._ready = anyio.Event()
        return item


def store_name(source: RemoteSource | AsyncRemoteSource) -> str:
    """The store a source belongs to, for its call account when the caller has no spec: the
    store package's name (``dynconf_store_consul`` → ``consul``), else the class's."""
    module = type(source).__module__.split(".")[0]
    if module.startswith("dynconf_store_"):
        return module.removeprefix("dynconf_store_")
    if module == "dynconf":
        return "file" if "file_store" in type(source).__module__ else "remote"
    return type(source).__name__.lower()


def calls_of(
    source: RemoteSource | AsyncRemoteSource, calls: StoreCalls | None = None
) -> StoreCalls:
    """``calls``, else the process account of the source's store (endpoint unknown)."""
    return calls if calls is not None else ledger().account(store_name(source))


async def _counted_async(calls: StoreCalls, read: Callable[[], Awaitable[Answer]]) -> Answer:
    await calls.admit_async()
    try:
        answer = await read()
    except Exception as error:  # a cancelled read was not answered: not counted
        calls.record(error)
        raise
    calls.record(answer)
    return answer


def _counted(calls: StoreCalls, read: Callable[[], Answer]) -> Answer:
    calls.admit_blocking()
    try:
        answer = read()
    except Exception as error:  # a cancelled read was not answered: not counted
        calls.record(error)
        raise
    calls.record(answer)
    return answer


class StoreDriver:
    """One built source, with fetch and watch callable from the event loop.

    ``calls`` is the account every read of the source is admitted and counted in (the
    caller's, from its spec: :meth:`dynconf.budget.CallLedger.for_spec`). ``build`` makes
    another client of the same store and spec: a resync reads through one of its own
    (:meth:`fetch_apart`) and a stalled watch is reopened on a fresh one (:meth:`renew`).
    Without it both fall back to ``source`` itself. :meth:`built` builds the first client
    with it too.
    """

    def __init__(
        self,
        source: Source,
        *,
        calls: StoreCalls | None = None,
        build: Callable[[], Source] | None = None,
    ) -> None:
        self.source = source
        self.calls = calls_of(source, calls)
        self.is_async = is_async_source(source)
        self.capability: WatchCapability = source.capability
        self.build = build
        self._hooks: tuple[Callable[[BaseException], None], Callable[[], None]] | None = None

    @classmethod
    def built(cls, build: Callable[[], Source], *, calls: StoreCalls | None = None) -> StoreDriver:
        """A driver on ``build()``'s client, keeping ``build`` for resyncs and renewals."""
        return cls(build(), calls=calls, build=build)

    @property
    def reports_watching(self) -> bool:
        """The source's type declares that its watch calls ``on_watching`` for each answer
        or poll (``reports_watching``, :class:`~dynconf.sources.SourceSupport`); asked of
        the declaration, since every source has the hook attribute its base defines."""
        return getattr(self.source, "reports_watching", False) is True

    def describe(self) -> str:
        return self.source.describe()

    def set_hooks(
        self, on_failure: Callable[[BaseException], None], on_watching: Callable[[], None]
    ) -> None:
        """Install the watch-health hooks the store contract names (``stores.py``)."""
        self._hooks = (on_failure, on_watching)
        for name, hook in (("on_failure", on_failure), ("on_watching", on_watching)):
            try:
                setattr(self.source, name, hook)
            except AttributeError:  # a slotted source without the hook: it reports nothing
                continue

    def connected(self) -> bool | None:
        """The source's own view of its stream, when it keeps one (``connected``)."""
        value = getattr(self.source, "connected", None)
        return value if isinstance(value, bool) else None

    async def fetch(self) -> Answer:
        """One read, admitted by the budget and counted."""
        if self.is_async:
            source_async: AsyncRemoteSource = self.source  # type: ignore[assignment]
            return await _counted_async(self.calls, source_async.fetch)
        source: RemoteSource = self.source  # type: ignore[assignment]

        async def read() -> Answer:
            import anyio.to_thread

            return await anyio.to_thread.run_sync(source.fetch, abandon_on_cancel=True)

        return await _counted_async(self.calls, read)

    async def read(self, kind: str, deadline: float) -> Answer:
        """The read a follower's ``kind`` asks for: a resync apart from the watch
        (:meth:`fetch_apart`, within ``deadline``), any other read through the source."""
        return await (self.fetch_apart(deadline) if kind == "resync" else self.fetch())

    async def fetch_apart(self, deadline: float) -> Answer:
        """One read through a client of its own, closed after it (``build``), within
        ``deadline`` seconds; without ``build``, :meth:`fetch` on the source itself.

        The read never shares a connection with the watch: a stream that stalled without
        closing keeps its connection (and, for some clients, the pooled ones beside it)
        silent, and a read over it would wait out the client's timeout, if it has one.
        """
        import anyio

        build = self.build
        if build is None:
            with anyio.fail_after(deadline):
                return await self.fetch()
        with anyio.fail_after(deadline):
            if self.is_async:
                return await _counted_async(self.calls, lambda: _read_async_and_close(build))

            async def read() -> Answer:
                import anyio.to_thread

                return await anyio.to_thread.run_sync(
                    _read_and_close, build, abandon_on_cancel=True
                )

            return await _counted_async(self.calls, read)

    async def renew(self) -> bool:
        """Replace the source with a fresh client of ``build`` (its hooks installed) and
        close the old one off the loop; False, changing nothing, without ``build``.

        Closing the old client is what frees a watch thread stuck reading a connection
        that forwards nothing; the close is not waited for beyond a bound.
        """
        import anyio
        import anyio.to_thread

        if self.build is None:
            return False
        fresh = await anyio.to_thread.run_sync(self.build)
        old, self.source = self.source, fresh
        if self._hooks is not None:
            self.set_hooks(*self._hooks)
        with anyio.move_on_after(2):
            if is_async_source(old):
                await cast(AsyncRemoteSource, old).aclose()
            else:
                await anyio.to_thread.run_sync(
                    cast(RemoteSource, old).close, abandon_on_cancel=True
                )
        return True

    async def watch(self, interval: float, deliver: Callable[[Delivery], None]) -> None:
        """Run the store's ``changes`` until it ends; raises what it raised."""
        if self.is_async:
            source_async: AsyncRemoteSource = self.source  # type: ignore[assignment]
            async for answer in source_async.changes(interval):
                deliver(Delivery(answer, "delivery", time.monotonic()))
            return
        await self._watch_blocking(interval, deliver)

    async def _watch_blocking(self, interval: float, deliver: Callable[[Delivery], None]) -> None:
        import anyio
        import anyio.lowlevel

        from dynconf.concurrency import call_soon_in_loop

        source: RemoteSource = self.source  # type: ignore[assignment]
        token = anyio.lowlevel.current_token()
        stop = threading.Event()
        done = anyio.Event()
        outcome: list[BaseException] = []

        def run() -> None:
            # every call into the loop is scheduled, never waited on: the loop may stop
            # at any moment, and a thread blocked on it would outlive the follower
            try:
                for answer in source.changes(interval, stop.is_set):
                    if stop.is_set():
                        break
                    delivery = Delivery(answer, "delivery", time.monotonic())
                    if not call_soon_in_loop(token, deliver, delivery):
                        return  # the loop is gone (shutdown): nothing to hand over to
                    # let the loop render it before this thread builds its next request
                    if stop.wait(HANDOFF_GRACE):
                        break
            except BaseException as error:
                outcome.append(error)
            if not stop.is_set():
                call_soon_in_loop(token, done.set)

        # a daemon thread, so a store client stuck in a long poll never holds up exit
        thread = threading.Thread(target=run, name="dynconf-watch", daemon=True)
        thread.start()
        try:
            await done.wait()
        finally:
            stop.set()
        if outcome:
            raise outcome[0]

    async def close(self) -> None:
        import anyio
        import anyio.to_thread

        if self.is_async:
            source_async: AsyncRemoteSource = self.source  # type: ignore[assignment]
            with anyio.move_on_after(2):
                await source_async.aclose()
            return
        source: RemoteSource = self.source  # type: ignore[assignment]
        with anyio.move_on_after(2):
            await anyio.to_thread.run_sync(source.close, abandon_on_cancel=True)


def _read_and_close(build: Callable[[], Source]) -> Answer:
    """Build a blocking client, read once through it, close it (a worker thread's job)."""
    spare = cast(RemoteSource, build())
    try:
        return spare.fetch()
    finally:
        spare.close()


async def _read_async_and_close(build: Callable[[], Source]) -> Answer:
    import anyio
    import anyio.to_thread

    spare = cast(AsyncRemoteSource, await anyio.to_thread.run_sync(build))
    try:
        return await spare.fetch()
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            await spare.aclose()


class AsyncSourceError(BackendError):
    """A blocking read was asked of an async source that must stay on its own event loop."""


def fetch_once(
    source: RemoteSource | AsyncRemoteSource,
    *,
    close: bool = False,
    calls: StoreCalls | None = None,
) -> Answer:
    """One read of ``source`` from blocking code (no event loop runs in this thread).

    A blocking source is called here. An async source is read only when this read is its
    client's whole life (``close``): it then runs on an event loop of its own and is closed
    there. Otherwise its client belongs to the loop that will go on using it, and
    :class:`AsyncSourceError` says to use :func:`fetch_once_async` from that loop.
    ``close`` releases the client after the read, whatever the read did. ``calls`` is the
    account the read is admitted and counted in (default: the source's store's).
    """
    driver = StoreDriver(source, calls=calls)
    if driver.is_async:
        if not close:
            raise AsyncSourceError(
                f"the remote source {driver.describe()} is async; read it from its event loop "
                "with the async call",
                origin=Origin.remote(driver.describe()),
            )
        import anyio

        return anyio.run(_fetch_async_and_close, driver)
    blocking = cast(RemoteSource, source)
    try:
        return _counted(driver.calls, blocking.fetch)
    finally:
        if close:
            blocking.close()


async def fetch_once_async(
    source: RemoteSource | AsyncRemoteSource,
    *,
    executor: Executor | None = None,
    calls: StoreCalls | None = None,
) -> Answer:
    """One read of ``source`` from the event loop: an async source is awaited here, a
    blocking one runs off the loop (:func:`dynconf.concurrency.run_blocking`, on
    ``executor`` or the process default); admitted and counted in ``calls``."""
    driver = StoreDriver(source, calls=calls)
    if driver.is_async:
        return await _counted_async(driver.calls, cast(AsyncRemoteSource, source).fetch)
    blocking = cast(RemoteSource, source)

    async def read() -> Answer:
        from dynconf.concurrency import run_blocking

        return await run_blocking(blocking.fetch, executor=executor)

    return await _counted_async(driver.calls, read)


async def _fetch_async_and_close(driver: StoreDriver) -> Answer:
    try:
        return await driver.fetch()
    finally:
        await driver.close()


class FollowEvents:
    """What a follower reports as it goes; each method does nothing unless overridden.

    The agent counts these into its metrics; other followers only log (the follower logs
    ``fetch_failed`` and ``watch_reopening`` itself).
    """

    def read(self, kind: str) -> None:
        """A read of the store succeeded (``first``, ``resync``, ``reopen``, ``catch_up``)."""

    def read_failed(self, kind: str) -> None:
        """A read of the store failed; the follower logged why."""

    def delivered(self) -> None:
        """The watch delivered a change."""

    def watch_failed(self) -> None:
        """The source reported a failure its watch survives by retrying (``on_failure``)."""

    def watching(self) -> None:
        """The source reported its stream up or a poll done (``on_watching``)."""

    def reopening(self) -> None:
        """The watch ended or failed and is reopened after a backoff."""

    def stalled(self) -> None:
        """A resync found a change the open watch never delivered; it is being reopened."""

    def watch_error(self, error: BaseException) -> None:
        """The store's watch raised ``error`` (then :meth:`reopening` follows)."""


class Follower:
    """Follow one store into a :class:`Slot` until cancelled (see the module's rules).

    ``fetch`` is the one read every follower read goes through (the agent wraps it in a
    span); ``reread`` off means no catch-up and no read before a reopen (a Vault
    ``--dynamic`` read issues a new credential each time). Call :meth:`seen` with the answer
    the caller read before :meth:`run`, so a catch-up knows what was already handed on.
    """

    def __init__(
        self,
        driver: StoreDriver,
        interval: float,
        slot: Slot,
        *,
        fetch: Callable[[str], Awaitable[Answer]] | None = None,
        events: FollowEvents | None = None,
        reread: bool = True,
        log: logging.Logger | None = None,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        self._driver = driver
        self.interval = interval
        self.slot = slot
        self.reread = reread
        self.events = events or FollowEvents()
        self._fetch = fetch
        self._log = log or _log
        self._extra = dict(extra or {})
        self.last: Answer | None = None
        """The newest answer handed on (what a catch-up compares a fresh read with)."""
        self.fresh_reads = 0
        """Successful reads, the caller's first one included (0: the store never answered)."""
        self.confirmed_at = time.monotonic()
        """When a read or a delivered change last confirmed the document (monotonic): a
        push store is resynced once this is an interval old. A stream's own "up" report
        never moves it."""
        self.stalls = 0
        """Resyncs that found a change the open watch had not delivered."""
        self._delivered_at = 0.0
        self.watching = False
        self.healthy = False
        self._observed: anyio.Event | None = None
        self._loop_thread: int | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._resync_busy = False
        self._watch_scope: anyio.CancelScope | None = None
        """The running watch's scope, which a realign cancels (None between watches)."""
        self._realigning = False
        driver.set_hooks(self._hook_failed, self._hook_watching)

    @property
    def driver(self) -> StoreDriver:
        return self._driver

    @driver.setter
    def driver(self, driver: StoreDriver) -> None:
        """A rebuilt client replaces the old one; its health hooks report here too."""
        self._driver = driver
        driver.set_hooks(self._hook_failed, self._hook_watching)

    # ------------------------------------------------------------------ answers
    def seen(self, answer: Answer | None) -> None:
        """The caller read ``answer`` itself (``None``: it tried, and the read failed)."""
        if answer is not None:
            self.last = answer
            self.fresh_reads += 1
            self.confirmed_at = time.monotonic()

    def put(self, answer: Answer, kind: Kind) -> None:
        """Hand ``answer`` on to the slot as ``kind``."""
        self.last = answer
        self.slot.put(Delivery(answer, kind, time.monotonic()))

    @property
    def read_deadline(self) -> float:
        """Seconds a resync read may take (:data:`READ_DEADLINE_FLOOR`)."""
        return max(READ_DEADLINE_FLOOR, self.interval)

    async def read(self, kind: Kind) -> Answer | None:
        """One read of the store; the answer, or ``None`` when it failed (logged).

        A resync reads apart from the watch (:meth:`StoreDriver.read`); a caller's own
        ``fetch`` (a span around the read) is asked with the kind and reads the same way.
        """
        try:
            if self._fetch is not None:
                answer = await self._fetch(kind)
            else:
                answer = await self.driver.read(kind, self.read_deadline)
        except Exception as error:
            self.events.read_failed(kind)
            reason = (
                f"the read took longer than {self.read_deadline:g} s"
                if isinstance(error, TimeoutError)
                else reason_of(error)
            )
            self._log.warning("fetch_failed", extra={**self._extra, "kind": kind, "reason": reason})
            return None
        self.fresh_reads += 1
        self.confirmed_at = time.monotonic()
        self.events.read(kind)
        return answer

    async def _read_into_slot(self, kind: Kind) -> bool:
        answer = await self.read(kind)
        if answer is None:
            return False
        self.put(answer, kind)
        return True

    # ------------------------------------------------------------------ run
    @property
    def push(self) -> bool:
        return self.driver.capability is WatchCapability.PUSH

    def confirmed_within(self, seconds: float) -> bool:
        """A read or a delivered change confirmed the document in the last ``seconds``."""
        return time.monotonic() - self.confirmed_at < seconds

    async def run(self, *, read_first: bool = False) -> None:
        """Watch, resync and catch up until cancelled.

        ``read_first`` reads the store at once (a follower resumed after a restart, with no
        answer of its own yet); otherwise a follower whose caller never read successfully
        retries on a backoff, starting one interval from now.
        """
        import anyio
        import anyio.lowlevel

        self._loop_thread = threading.get_ident()
        self._token = anyio.lowlevel.current_token()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch_forever)
            tg.start_soon(self._resync_forever, tg, read_first)

    def _pace(self) -> Pace:
        return Pace(self.interval, ceiling=min(300.0, max(30.0, self.interval * 4)))

    # ------------------------------------------------------------------ hooks
    def _hook_failed(self, error: BaseException) -> None:
        self.healthy = False
        self.events.watch_failed()
        self._watch_call(error)

    def _hook_watching(self) -> None:
        self.healthy = True
        self.events.watching()
        self._signal_observed()
        self._watch_call(None)

    def _watch_call(self, error: BaseException | None) -> None:
        """Count one of the watch's own calls; a blocking watch waits out the budget here.

        The hook runs where the store's watch runs: on a blocking store's watch thread the
        wait delays its next request (the loop is not blocked); on the loop it only counts.
        """
        calls = self.driver.calls
        if error is None:
            calls.count("ok")
        else:
            calls.record(error)
        if threading.get_ident() == self._loop_thread:
            return
        try:
            calls.admit_blocking()
        except BudgetExceeded:
            return  # counted and logged; the store's own pace spaces its retries

    def _signal_observed(self) -> None:
        """Set the current watch's observed event from whichever thread the source reports on."""
        event = self._observed
        if event is None or event.is_set():
            return
        if threading.get_ident() == self._loop_thread:
            event.set()
            return
        if self._token is not None:
            from dynconf.concurrency import call_soon_in_loop

            call_soon_in_loop(self._token, event.set)  # False: the loop is gone, nobody waits

    # ------------------------------------------------------------------ watch
    async def _watch_forever(self) -> None:
        import anyio

        pace = self._pace()
        opened = 0
        realigned = False
        while True:
            self.watching = True
            self.healthy = True
            if opened and self.push and self.reread and not realigned:
                # changes that landed while the watch was down: a reopened watch primes
                # silently, so read once and hand the answer over (a realigned watch was
                # not down: the read that set it off was handed over already)
                await self._read_into_slot("reopen")
            opened += 1
            started = time.monotonic()
            # a push watch that reports each answer is caught up like a poll watch: the one
            # read that closes the window before its prime (one that reports nothing has
            # its first resync within the interval for that)
            catch_up = self.reread and (not self.push or self.driver.reports_watching)
            reason = await self._watch_once(catch_up=catch_up)
            realigned = reason is None
            if realigned:
                continue  # re-primed on purpose (see _realign): not a failure
            self.watching = False
            self.events.reopening()
            if time.monotonic() - started > 4 * self.interval:
                pace.succeeded()
            pace.failed()
            wait = pace.next_wait()
            self._log.warning(
                "watch_reopening",
                extra={**self._extra, "reason": reason, "after_seconds": round(wait, 2)},
            )
            await anyio.sleep(wait)

    async def _watch_once(self, *, catch_up: bool) -> str | None:
        """Run the store's watch until it ends: why it ended, or None when it was realigned."""
        import anyio

        observed = anyio.Event()
        self._observed = observed
        self._realigning = False
        async with anyio.create_task_group() as tg:
            self._watch_scope = tg.cancel_scope
            if catch_up:
                tg.start_soon(self._catch_up, observed)
            try:
                await self.driver.watch(self.interval, self._deliver)
                reason: str | None = "the watch ended"
            except Exception as error:
                reason = reason_of(error)
                self.events.watch_error(error)
            tg.cancel_scope.cancel()
        self._watch_scope = None
        return None if self._realigning else reason

    def _realign(self) -> None:
        """Reopen the running watch so it primes on the store as it is now (module docstring)."""
        scope = self._watch_scope
        if scope is not None and not scope.cancel_called:
            self._realigning = True
            scope.cancel()

    def _realign_if_missed(self, before: Answer | None, answer: Answer) -> None:
        """``answer`` was read beside the watch; if it differs from what the watch handed on
        last (``before``), the watch missed it and its marker may be stale: realign it."""
        if before is not None and not same_document(answer, before):
            self._realign()

    async def _catch_up(self, observed: anyio.Event) -> None:
        """Read after the watch's first observation; a change found realigns the watch."""
        import anyio

        if self.driver.reports_watching:
            # bounded: a watch that never gets its first answer is caught up all the same
            with anyio.move_on_after(max(self.interval, READ_DEADLINE_FLOOR)):
                await observed.wait()
        else:
            # a source that does not report its polls has surely made its first one by now
            await anyio.sleep(self.interval)
        answer = await self.read("catch_up")
        before = self.last  # after the read: the watch may have handed the same on meanwhile
        if answer is None or (before is not None and same_document(answer, before)):
            return
        self.put(answer, "reopen")
        self._realign_if_missed(before, answer)

    def _deliver(self, delivery: Delivery) -> None:
        self.events.delivered()
        self.healthy = True
        self.confirmed_at = self._delivered_at = delivery.at
        self.last = delivery.answer
        self.slot.put(delivery)

    # ------------------------------------------------------------------ resync
    async def _resync_forever(self, tg: TaskGroup, read_first: bool) -> None:
        import anyio

        readable = self._pace()
        while True:
            if self.fresh_reads == 0:
                # the store was down at start: keep asking, backing off, until it answers
                if not read_first:
                    await anyio.sleep(readable.next_wait() if readable.failures else self.interval)
                read_first = False
                if await self._read_into_slot("reopen"):
                    readable.succeeded()
                else:
                    readable.failed()
                continue
            if not self.push:
                return  # a poll store is asked by its own watch at the interval
            # one timer, armed for the moment the document's confirmation runs out
            due = self.confirmed_at + self.interval - time.monotonic()
            if due > 0:
                await anyio.sleep(due)
                continue
            if not self._resync_busy:
                tg.start_soon(self._resync_once)
            await anyio.sleep(self.interval)

    async def _resync_once(self) -> None:
        import anyio

        self._resync_busy = True
        try:
            silent = time.monotonic() - self.confirmed_at
            asked = time.monotonic()
            answer = await self.read("resync")
            if answer is None:
                return
            before = self.last  # after the read, as in _catch_up
            self.put(answer, "resync")  # handed on at once; the watch is judged after
            if before is None or same_document(answer, before) or not self.watching:
                return
            # a change written just before the read is the stream's to deliver too: give
            # it a moment before calling it stalled (a live one delivers in milliseconds)
            await anyio.sleep(min(STALL_GRACE, self.interval / 2))
            if self._delivered_at < asked and self.watching:
                await self._stalled(silent)
        finally:
            self._resync_busy = False

    async def _stalled(self, silent: float) -> None:
        """The open watch missed a change: count it, renew its client, reopen it."""
        self.stalls += 1
        self.events.stalled()
        self._log.warning(
            "watch_stalled",
            extra={**self._extra, "store": self.driver.describe(),
                   "silent_seconds": round(silent, 2)},
        )  # fmt: skip
        await self.driver.renew()
        self._realign()
