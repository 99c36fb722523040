"""The library's last-known-good cache against a real config server that goes away.

Run one loads from the server and writes the cache; the server is stopped; run two (a
restart, a fresh DynamicConfig) starts from the cache instead of failing.
"""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest
from pydantic import BaseModel

from dynconf.config import DynamicConfig
from dynconf.errors import RemoteError

from .conftest import client_source

pytestmark = pytest.mark.configserver


class Db(BaseModel):
    host: str
    pool: int


class Billing(BaseModel):
    name: str
    port: int
    db: Db


def build(url: str, cache: Path) -> DynamicConfig[Billing]:
    return (
        DynamicConfig(Billing, "billing").whole_document().remote(client_source(url)).cache(cache)
    )


def test_a_restart_while_the_server_is_down_starts_from_the_cache(billing, tmp_path: Path):
    cache = tmp_path / "billing.last-good.json"
    first = build(billing.url, cache).init()
    assert (first.db.host, first.db.pool) == ("db.prod", 5)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    billing.stop()

    restarted = build(billing.url, cache)
    recovered = restarted.init()
    assert recovered == first
    assert restarted.status().last_reason == "recovered"
    remote = restarted.remote_status()
    assert remote is not None and remote.reachable is False


def test_an_async_restart_while_the_server_is_down_starts_from_the_cache(billing, tmp_path: Path):
    cache = tmp_path / "billing.last-good.json"
    first = asyncio.run(build(billing.url, cache).init_async())
    billing.stop()
    restarted = build(billing.url, cache)
    assert asyncio.run(restarted.init_async()) == first
    assert restarted.status().last_reason == "recovered"


def test_without_a_cache_the_restart_fails_naming_the_store(billing, tmp_path: Path):
    billing.stop()
    config = DynamicConfig(Billing, "billing").whole_document().remote(client_source(billing.url))
    with pytest.raises(RemoteError):
        config.init()
