"""The one follower: a change made between the caller's read and the watch's prime is delivered.

Every store's watch primes silently on its first observation. The source here is the real
``file`` store, wrapped so that its document changes exactly in that window (inside
``changes``, before the watch primes); once as a push store (a resync must find it) and once
declared a poll store (the catch-up after the first observation must find it).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import anyio
import anyio.to_thread
import pytest

from dynconf.file_store import FileSource
from dynconf.follow import Follower, Slot, StoreDriver
from dynconf.sources import report_watching
from dynconf.stores import Absent, Fetched, WatchCapability


class ChangedBeforeThePrime:
    """The real file source; its document is rewritten as ``changes`` starts. ``reports``:
    it reports its stream up once primed, as Consul's, etcd's and Redis's clients do."""

    def __init__(
        self,
        inner: FileSource,
        change: Callable[[], None],
        capability: WatchCapability,
        *,
        reports: bool = False,
    ) -> None:
        self.inner = inner
        self.change = [change]
        self.capability = capability
        self.reports = reports
        self.reports_watching = reports
        if reports:
            self.on_watching: Callable[[], None] | None = None

    def fetch(self) -> Fetched | Absent:
        return self.inner.fetch()

    def describe(self) -> str:
        return self.inner.describe()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        while self.change:
            self.change.pop()()
        inner = self.inner.changes(interval, stop)
        if self.reports:
            report_watching(self)  # the stream is up (the change above is already made)
        yield from inner

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize(
    ("capability", "reports"),
    [
        (WatchCapability.PUSH, False),
        (WatchCapability.PUSH, True),
        (WatchCapability.INTERVAL, False),
    ],
    ids=["push-resynced", "push-reporting-caught-up", "poll-caught-up"],
)
def test_a_change_before_the_watch_primes_is_delivered(
    tmp_path: Path, capability: WatchCapability, reports: bool
) -> None:
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    source = ChangedBeforeThePrime(
        FileSource(doc, "json"), lambda: doc.write_text('{"v": 2}'), capability, reports=reports
    )
    driver = StoreDriver(source)
    seen: list[str] = []

    async def scenario() -> None:
        slot = Slot()
        follower = Follower(driver, 0.2, slot)
        first = await driver.fetch()
        assert isinstance(first, Fetched)
        follower.seen(first)
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            with anyio.fail_after(10):
                while not seen or '"v": 2' not in seen[-1]:
                    answer = (await slot.take()).answer
                    assert isinstance(answer, Fetched)
                    seen.append(answer.text)
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    assert seen[-1] == '{"v": 2}'


def test_reason_of_a_missing_library_names_it() -> None:
    from dynconf.follow import reason_of

    try:
        import dynconf_no_such_client_library  # type: ignore[import-not-found]  # noqa: F401
    except ImportError as error:
        reason = reason_of(error)

    assert "dynconf_no_such_client_library" in reason
    assert "could not be loaded" in reason


def test_reason_of_any_other_error_is_only_its_kind() -> None:
    from dynconf.follow import reason_of

    assert reason_of(ValueError("password=hunter2")) == "ValueError"


class ReportsAfterTheLoopStopped:
    """The real file source; its watch thread reports and yields only after the loop ended.

    A store's watch thread runs on its own clock: a long poll can answer just as the
    follower's loop shuts down. Whatever it then hands to the loop must not hold it.
    """

    def __init__(self, inner: FileSource, capability: WatchCapability) -> None:
        self.inner = inner
        self.capability = capability
        self.release = threading.Event()
        self.waiting = threading.Event()
        self.on_watching: Callable[[], None] | None = None
        self.on_failure: Callable[[BaseException], None] | None = None

    def fetch(self) -> Fetched | Absent:
        return self.inner.fetch()

    def describe(self) -> str:
        return self.inner.describe()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        self.waiting.set()
        self.release.wait(10)
        report_watching(self)
        yield self.inner.fetch()
        yield self.inner.fetch()

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("capability", [WatchCapability.PUSH, WatchCapability.INTERVAL])
def test_a_watch_thread_that_answers_after_the_loop_stopped_ends(
    tmp_path: Path, capability: WatchCapability
) -> None:
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    source = ReportsAfterTheLoopStopped(FileSource(doc, "json"), capability)
    driver = StoreDriver(source)

    async def scenario() -> None:
        follower = Follower(driver, 0.2, Slot())
        follower.seen(await driver.fetch())
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            await anyio.to_thread.run_sync(source.waiting.wait, 10)
            tg.cancel_scope.cancel()

    # stopped, not yet closed: what a loop is while its owner winds down (asyncio.run's
    # shutdown, a framework's lifespan); a call queued on it now is never run
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(scenario())
        source.release.set()
        watch_threads = [t for t in threading.enumerate() if t.name == "dynconf-watch"]
        for thread in watch_threads:
            thread.join(5)
        assert not [t for t in watch_threads if t.is_alive()]
    finally:
        loop.close()


class ReportsItsStream:
    """The real file source, reporting its stream as a push store's client does: up once it
    primed (etcd, Redis report only the opening), or a failure after it (``fail_after``)."""

    def __init__(self, inner: FileSource, *, fail: bool = False) -> None:
        self.inner = inner
        self.capability = WatchCapability.PUSH
        self.fail = fail
        self.on_watching: Callable[[], None] | None = None
        self.on_failure: Callable[[BaseException], None] | None = None

    def fetch(self) -> Fetched | Absent:
        return self.inner.fetch()

    def describe(self) -> str:
        return self.inner.describe()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        report_watching(self)
        if self.fail and self.on_failure is not None:
            self.on_failure(ConnectionError("the stream broke"))
        yield from self.inner.changes(interval, stop)

    def close(self) -> None:
        self.inner.close()


def _resyncs_over(source: object, seconds: float, *, interval: float) -> int:
    """How many resyncs a follower of ``source`` made in ``seconds``."""
    from dynconf.follow import FollowEvents

    kinds: list[str] = []

    class Reads(FollowEvents):
        def read(self, kind: str) -> None:
            kinds.append(kind)

    driver = StoreDriver(source)  # type: ignore[arg-type]

    async def scenario() -> None:
        follower = Follower(driver, interval, Slot(), events=Reads())
        follower.seen(await driver.fetch())
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            await anyio.sleep(seconds)
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    return kinds.count("resync")


def test_a_push_watch_that_reports_its_stream_up_is_still_resynced_every_interval(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    # the stream's "up" vouches for nothing: a stream that stalls without closing says so too
    assert _resyncs_over(ReportsItsStream(FileSource(doc, "json")), 1.0, interval=0.1) >= 5


def test_a_push_watch_that_reports_nothing_is_resynced_every_interval(tmp_path: Path) -> None:
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    assert _resyncs_over(FileSource(doc, "json"), 1.0, interval=0.1) >= 5


def test_a_resync_is_not_sent_while_the_last_read_is_younger_than_the_interval(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    # one timer, armed for when the confirmation runs out: at most one resync an interval
    assert _resyncs_over(FileSource(doc, "json"), 1.0, interval=0.3) <= 4


class Stalled:
    """A push source whose stream stays open and forwards nothing (a black-holed connection,
    a fault no real server produces on demand), over the real file source's reads. Each one
    built is recorded, so a test sees the follower build a fresh client and close the old."""

    built: ClassVar[list[Stalled]] = []

    def __init__(self, inner: FileSource, *, hang: threading.Event | None = None) -> None:
        self.inner = inner
        self.capability = WatchCapability.PUSH
        self.hang = hang
        self.closed = threading.Event()
        self.watches = 0
        Stalled.built.append(self)

    def fetch(self) -> Fetched | Absent:
        if self.hang is not None and self.hang.is_set():
            self.closed.wait(30)  # a read over a dead connection: answers nothing
        return self.inner.fetch()

    def describe(self) -> str:
        return self.inner.describe()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        self.watches += 1
        while not stop() and not self.closed.is_set():
            self.closed.wait(0.05)
        return
        yield  # a generator that never yields

    def close(self) -> None:
        self.closed.set()


def test_a_stalled_stream_is_caught_by_a_resync_and_reopened_on_a_fresh_client(
    tmp_path: Path,
) -> None:
    from dynconf.follow import FollowEvents

    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    Stalled.built = []
    stalls: list[int] = []

    class Counts(FollowEvents):
        def stalled(self) -> None:
            stalls.append(1)

    driver = StoreDriver.built(lambda: Stalled(FileSource(doc, "json")))
    first = Stalled.built[0]
    slot = Slot()

    async def scenario() -> Fetched | Absent:
        follower = Follower(driver, 0.2, slot, events=Counts())
        follower.seen(await driver.fetch())
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            await anyio.sleep(0.1)
            doc.write_text('{"v": 2}')
            with anyio.fail_after(5):
                delivery = await slot.take()
            with anyio.fail_after(5):
                while not stalls or not first.closed.is_set():
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        return delivery.answer

    answer = anyio.run(scenario)
    assert isinstance(answer, Fetched) and '"v": 2' in answer.text
    assert stalls == [1]
    assert first.closed.is_set()  # the stuck client was closed, freeing its thread
    # the resync read through a client of its own, closed after it: never the watch's
    resync_clients = [s for s in Stalled.built if s is not first and s is not driver.source]
    assert resync_clients and all(s.closed.is_set() and s.watches == 0 for s in resync_clients)


def test_a_resync_over_a_dead_connection_fails_at_its_deadline_and_the_next_one_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dynconf.follow
    from dynconf.follow import FollowEvents

    monkeypatch.setattr(dynconf.follow, "READ_DEADLINE_FLOOR", 0.3)
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    hang = threading.Event()
    failed: list[str] = []

    class Counts(FollowEvents):
        def read_failed(self, kind: str) -> None:
            failed.append(kind)

    driver = StoreDriver.built(lambda: Stalled(FileSource(doc, "json"), hang=hang))

    async def scenario() -> None:
        follower = Follower(driver, 0.1, Slot(), events=Counts())
        follower.seen(await driver.fetch())
        hang.set()
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            with anyio.fail_after(5):
                while len(failed) < 2:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    assert failed[:2] == ["resync", "resync"]
    for source in Stalled.built:
        source.close()


class TimesItsRequests:
    """The real file source; its watch notes when it is asked for the next answer after
    each one it yields (the moment a store's watch would build its next request)."""

    def __init__(self, inner: FileSource, count: int) -> None:
        self.inner = inner
        self.capability = WatchCapability.PUSH
        self.count = count
        self.gaps: list[float] = []

    def fetch(self) -> Fetched | Absent:
        return self.inner.fetch()

    def describe(self) -> str:
        return self.inner.describe()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        import time

        for _ in range(self.count):
            answer = self.inner.fetch()
            yielded = time.monotonic()
            yield answer
            self.gaps.append(time.monotonic() - yielded)
        while not stop():
            time.sleep(0.01)

    def close(self) -> None:
        self.inner.close()


def test_a_blocking_watch_asks_again_only_after_the_handoff_grace(tmp_path: Path) -> None:
    from dynconf.follow import HANDOFF_GRACE

    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    source = TimesItsRequests(FileSource(doc, "json"), count=3)
    driver = StoreDriver(source)

    async def scenario() -> None:
        follower = Follower(driver, 5.0, Slot())
        follower.seen(await driver.fetch())
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            with anyio.fail_after(10):
                while len(source.gaps) < 3:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    assert min(source.gaps) >= HANDOFF_GRACE * 0.9


class FlickersAfterThePrime(FileSource):
    """The real file source, reporting each of its watch's reads as Consul's client reports
    each blocking query, whose document is deleted and written back unchanged around the
    first read made beside a primed watch (the catch-up).

    That read finds the document gone. The watch's marker still holds the text written back,
    so the rewrite is nothing new to it: only a realigned watch delivers the document again
    after the catch-up's ABSENT.
    """

    reports_watching = True

    def __init__(self, path: Path) -> None:
        super().__init__(path, "json")
        self.on_watching: Callable[[], None] | None = None
        self._watch_threads: set[int] = set()
        self._flickered = False

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        self._watch_threads.add(threading.get_ident())
        yield from super().changes(interval, stop)

    def fetch(self) -> Fetched | Absent:
        if threading.get_ident() in self._watch_threads:
            answer = super().fetch()
            report_watching(self)
            return answer
        if not self._watch_threads or self._flickered:
            return super().fetch()
        self._flickered = True
        text = self._path.read_text()
        self._path.unlink()
        gone = super().fetch()
        self._path.write_text(text)
        return gone


def test_a_change_back_to_the_watchs_marker_after_a_catch_up_is_delivered(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    driver = StoreDriver(FlickersAfterThePrime(doc))
    seen: list[Fetched | Absent] = []

    async def scenario() -> None:
        slot = Slot()
        # the interval (resync) is far off: only the watch and its catch-ups can answer
        follower = Follower(driver, 30.0, slot)
        follower.seen(await driver.fetch())
        async with anyio.create_task_group() as tg:
            tg.start_soon(follower.run)
            with anyio.fail_after(10):
                while not (seen and isinstance(seen[0], Absent) and isinstance(seen[-1], Fetched)):
                    seen.append((await slot.take()).answer)
            tg.cancel_scope.cancel()

    anyio.run(scenario)
    last = seen[-1]
    assert isinstance(last, Fetched) and last.text == '{"v": 1}'
