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

import anyio
import anyio.to_thread
import pytest

from dynconf.file_store import FileSource
from dynconf.follow import Follower, Slot, StoreDriver
from dynconf.sources import report_watching
from dynconf.stores import Absent, Fetched, WatchCapability


class ChangedBeforeThePrime:
    """The real file source; its document is rewritten as ``changes`` starts."""

    def __init__(
        self, inner: FileSource, change: Callable[[], None], capability: WatchCapability
    ) -> None:
        self.inner = inner
        self.change = [change]
        self.capability = capability

    def fetch(self) -> Fetched | Absent:
        return self.inner.fetch()

    def describe(self) -> str:
        return self.inner.describe()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        while self.change:
            self.change.pop()()
        yield from self.inner.changes(interval, stop)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("capability", [WatchCapability.PUSH, WatchCapability.INTERVAL])
def test_a_change_before_the_watch_primes_is_delivered(
    tmp_path: Path, capability: WatchCapability
) -> None:
    doc = tmp_path / "app.json"
    doc.write_text('{"v": 1}')
    source = ChangedBeforeThePrime(
        FileSource(doc, "json"), lambda: doc.write_text('{"v": 2}'), capability
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
