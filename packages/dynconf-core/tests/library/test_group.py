"""ConfigGroup: one lifecycle for several configurations, reloaded all-or-none."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from dynconf.config import DynamicConfig, ReloadReason
from dynconf.errors import InvalidError, ParseError
from dynconf.group import ConfigGroup

WAIT = 10.0


class Db(BaseModel):
    port: int


class Cache(BaseModel):
    ttl: int


def save(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_text(text, encoding="utf-8")
    scratch.replace(path)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    db, cache = tmp_path / "db.toml", tmp_path / "cache.toml"
    save(db, "[db]\nport = 1\n")
    save(cache, "[cache]\nttl = 10\n")
    return db, cache


@pytest.fixture
def group(files: tuple[Path, Path]) -> ConfigGroup:
    db, cache = files
    return ConfigGroup(DynamicConfig(Db, "db").file(db), DynamicConfig(Cache, "cache").file(cache))


def test_reload_atomic_installs_every_member_when_all_validate(
    group: ConfigGroup, files: tuple[Path, Path]
) -> None:
    group.init()
    save(files[0], "[db]\nport = 2\n")
    save(files[1], "[cache]\nttl = 20\n")
    group.reload_atomic()
    db, cache = group.configs
    assert (db.current().port, cache.current().ttl) == (2, 20)
    assert group.generations() == {"db": 2, "cache": 2}


def test_reload_atomic_installs_no_member_when_one_refuses(
    group: ConfigGroup, files: tuple[Path, Path]
) -> None:
    group.init()
    save(files[0], "[db]\nport = 2\n")
    save(files[1], '[cache]\nttl = "soon"\n')
    with pytest.raises(InvalidError) as refused:
        group.reload_atomic()
    assert any("`cache` refused" in note for note in refused.value.__notes__)
    db, cache = group.configs
    assert (db.current().port, cache.current().ttl) == (1, 10)
    assert group.generations() == {"db": 1, "cache": 1}
    status = group.status()
    assert status["cache"].consecutive_failures == 1
    assert status["db"].consecutive_failures == 0


def test_plain_reload_lets_each_member_go_its_own_way(
    group: ConfigGroup, files: tuple[Path, Path]
) -> None:
    group.init()
    save(files[0], "[db]\nport = 2\n")
    save(files[1], "[cache\n")
    with pytest.raises(ParseError):
        group.reload()
    assert group.generations() == {"db": 2, "cache": 1}


def test_atomic_watch_waits_until_every_edit_validates(
    group: ConfigGroup, files: tuple[Path, Path]
) -> None:
    """A deploy moving two files: the first edit alone breaks the pair's contract (the
    cache file is broken), so nothing installs; when the second lands, both do."""
    db_file, cache_file = files
    with group.running(debounce=0.02, atomic=True):
        db, cache = group.configs
        save(cache_file, "[cache\n")
        deadline = time.monotonic() + WAIT
        while cache.status().consecutive_failures == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        save(db_file, "[db]\nport = 2\n")
        deadline = time.monotonic() + WAIT
        while cache.status().refusals < 2:  # the db edit's atomic reload, refused too
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert db.current().port == 1  # refused with its partner, not installed alone
        save(cache_file, "[cache]\nttl = 30\n")
        deadline = time.monotonic() + WAIT
        while cache.generation < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (db.current().port, cache.current().ttl) == (2, 30)
        assert db.status().last_reason == ReloadReason.FILE_CHANGED.value
    assert not db.watching_now and not cache.watching_now


def test_group_refuses_two_members_with_one_key(files: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="share the key 'db'"):
        ConfigGroup(DynamicConfig(Db, "db").file(files[0]), DynamicConfig(Db, "db"))


@pytest.mark.anyio
async def test_running_async_starts_and_stops_every_member(
    group: ConfigGroup, files: tuple[Path, Path]
) -> None:
    async with group.running_async(debounce=0.02) as running:
        db, cache = running.configs
        stream = db.changes()
        save(files[0], "[db]\nport = 9\n")
        with anyio.fail_after(WAIT):
            assert (await anext(stream)).port == 9
        assert cache.watching_now
        await running.reload_atomic_async()
        assert running.generations() == {"db": 3, "cache": 2}
    assert not db.watching_now and not cache.watching_now


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
