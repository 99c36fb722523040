"""One-shot reads of a store go through ``dynconf.follow.fetch_once`` / ``fetch_once_async``.

The follower module is the one place that asks whether a source blocks or is async; the
callers that read once (``DynamicConfig.init`` and ``refresh_remote[_async]``, the operator's
render) get the same answer for either kind, or one refusal saying which call to make.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from dynconf.config import DynamicConfig
from dynconf.errors import BackendError
from dynconf.file_store import FILE_STORE
from dynconf.follow import AsyncSourceError, fetch_once, fetch_once_async
from dynconf.stores import AsyncRemoteSource, Fetched, RemoteSource, StoreSpec


class InMemoryAsync(AsyncRemoteSource):
    """An async store kept in memory; it records the loop thread it ran on and its close."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.closed = False

    async def fetch(self) -> Fetched:  # type: ignore[override]
        return Fetched(self.text, "json")

    async def aclose(self) -> None:
        self.closed = True

    def describe(self) -> str:
        return "in-memory async store"


def _file_source(tmp_path: Path, text: str) -> RemoteSource:
    path = tmp_path / "remote.json"
    path.write_text(text, encoding="utf-8")
    return FILE_STORE.build(StoreSpec(source="file", endpoint="", key=str(path)))


def test_fetch_once_reads_a_blocking_source(tmp_path: Path) -> None:
    answer = fetch_once(_file_source(tmp_path, '{"app": {"v": 1}}'), close=True)
    assert isinstance(answer, Fetched) and '"v": 1' in answer.text


def test_fetch_once_reads_an_async_source_it_may_close_on_a_loop_of_its_own() -> None:
    source = InMemoryAsync('{"app": {"v": 2}}')
    answer = fetch_once(source, close=True)
    assert isinstance(answer, Fetched) and '"v": 2' in answer.text
    assert source.closed


def test_fetch_once_refuses_an_async_source_that_must_stay_on_its_loop() -> None:
    source = InMemoryAsync("{}")
    with pytest.raises(AsyncSourceError, match="in-memory async store is async"):
        fetch_once(source)
    assert not source.closed


def test_fetch_once_async_reads_either_kind(tmp_path: Path) -> None:
    blocking = _file_source(tmp_path, '{"app": {"v": 3}}')
    async_source = InMemoryAsync('{"app": {"v": 4}}')

    async def both() -> tuple[object, object]:
        return await fetch_once_async(blocking), await fetch_once_async(async_source)

    first, second = anyio.run(both)
    assert isinstance(first, Fetched) and '"v": 3' in first.text
    assert isinstance(second, Fetched) and '"v": 4' in second.text
    assert not async_source.closed  # a read from the loop leaves the client to its owner


def test_refresh_remote_on_an_async_source_says_to_use_the_async_call() -> None:
    config = DynamicConfig(None, "app").remote(InMemoryAsync('{"app": {"v": 5}}'))
    with pytest.raises(BackendError, match=r"use refresh_remote_async\(\)"):
        config.refresh_remote()
    status = config.remote_status()
    assert status is not None and status.consecutive_failures == 0  # a usage error, not a read


def test_refresh_remote_async_then_init_installs_an_async_source() -> None:
    config = DynamicConfig(None, "app").remote(InMemoryAsync('{"app": {"v": 6}}'))
    anyio.run(config.refresh_remote_async)
    assert config.init()["v"] == 6


def test_refresh_remote_then_init_installs_a_blocking_source(tmp_path: Path) -> None:
    config = DynamicConfig(None, "app").remote(_file_source(tmp_path, '{"app": {"v": 7}}'))
    config.refresh_remote()
    assert config.init()["v"] == 7
    status = config.remote_status()
    assert status is not None and status.fetches == 1
