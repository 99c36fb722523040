"""The remote layer of DynamicConfig, driven by the embedded file store."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynconf.config import DynamicConfig
from dynconf.file_store import FILE_STORE
from dynconf.stores import StoreSpec


def test_remote_document_sits_above_files_and_below_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "config.toml"
    local.write_text('[app]\na = "file"\nb = "file"\nc = "file"\n', encoding="utf-8")
    remote = tmp_path / "remote.json"
    remote.write_text('{"app": {"b": "remote", "c": "remote"}}', encoding="utf-8")
    monkeypatch.setenv("TRL_APP_C", "env")
    source = FILE_STORE.build(StoreSpec(source="file", endpoint="", key=str(remote)))
    config = DynamicConfig(None, "app").file(local).env("TRL_").remote(source)
    config.refresh_remote()
    values = config.init()
    assert (values["a"], values["b"], values["c"]) == ("file", "remote", "env")
    assert str(config.source_of("b")).startswith("from file ")


def test_watch_remote_reloads_on_store_change(tmp_path: Path) -> None:
    remote = tmp_path / "remote.json"
    remote.write_text('{"app": {"v": 1}}', encoding="utf-8")
    source = FILE_STORE.build(StoreSpec(source="file", endpoint="", key=str(remote)))
    config = DynamicConfig(None, "app").remote(source)
    config.refresh_remote()
    assert config.init()["v"] == 1
    watch = config.watch_remote(interval=0.05)
    try:
        remote.write_text('{"app": {"v": 2}}', encoding="utf-8")
        assert config.changed(timeout=5) is not None
        assert config.current()["v"] == 2
        assert config.status().last_reason == "remote-changed"
    finally:
        watch.stop()
        watch.join(2)


def test_missing_remote_document_contributes_nothing(tmp_path: Path) -> None:
    source = FILE_STORE.build(StoreSpec(source="file", endpoint="", key=str(tmp_path / "x.json")))
    config = DynamicConfig(None, "app").set_default("a", 1).remote(source)
    config.refresh_remote()
    assert config.init()["a"] == 1
    status = config.remote_status()
    assert status is not None and status.reachable is True


def test_poll_store_change_before_the_watch_primes_is_not_lost(tmp_path: Path) -> None:
    """A conditional store primes its marker on its first poll; a change made between the
    last fetch and that poll is caught by the one resync the engine does after it."""
    import threading
    from collections.abc import Callable, Iterator

    from dynconf.file_store import FileSource
    from dynconf.stores import Absent, Fetched, WatchCapability

    class SlowPrimingPoller(FileSource):
        capability = WatchCapability.CONDITIONAL

        def __init__(self, path: Path) -> None:
            super().__init__(path, "json")
            self.release = threading.Event()

        def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
            self.release.wait(5)
            last = self.fetch()  # the prime: whatever is there now is "known"
            while not stop():
                answer = self.fetch()
                moved = isinstance(answer, Fetched) and isinstance(last, Fetched)
                if moved and answer.text != last.text:  # type: ignore[union-attr]
                    last = answer
                    yield answer
                threading.Event().wait(interval)

    remote = tmp_path / "remote.json"
    remote.write_text('{"app": {"v": 1}}', encoding="utf-8")
    source = SlowPrimingPoller(remote)
    config = DynamicConfig(None, "app").remote(source)
    config.refresh_remote()
    config.init()
    watch = config.watch_remote(interval=0.05)
    try:
        remote.write_text('{"app": {"v": 2}}', encoding="utf-8")  # before the prime
        source.release.set()
        assert config.changed(timeout=5) is not None
        assert config.current()["v"] == 2
    finally:
        watch.stop()
        watch.join(2)


def test_an_unchanged_resync_confirms_the_remote_document(tmp_path: Path) -> None:
    """A read that finds the document unchanged still confirms it: the remote layer's last
    fetch moves on every resync of a quiet push store, not only when the document changes."""
    import time

    remote = tmp_path / "remote.json"
    remote.write_text('{"app": {"v": 1}}', encoding="utf-8")
    source = FILE_STORE.build(StoreSpec(source="file", endpoint="", key=str(remote)))
    config = DynamicConfig(None, "app").remote(source)
    config.refresh_remote()
    config.init()
    first = config.remote_status()
    assert first is not None and first.last_fetch is not None
    watch = config.watch_remote(interval=0.1)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            status = config.remote_status()
            assert status is not None and status.last_fetch is not None
            if status.last_fetch > first.last_fetch + 0.15 and status.fetches >= 3:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the quiet store's resyncs never confirmed the document")
        assert config.status().generation == 1  # confirmed, not reloaded
    finally:
        watch.stop()
        watch.join(2)
