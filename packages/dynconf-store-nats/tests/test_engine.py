"""The engine drives the source: refresh on one loop, the watch and resyncs on others."""

from __future__ import annotations

import asyncio
import time

import pytest
from natskit import admin, bucket, run, source

from dynconf import DynamicConfig

pytestmark = pytest.mark.nats


def test_watch_remote_reloads_when_the_key_changes(nats_server):
    async def seed(value: bytes) -> None:
        client = await admin(nats_server.url)
        kv = await bucket(client, "engine")
        await kv.put("app/config.json", value)
        await client.close()

    run(lambda: seed(b'{"app": {"v": 1}}'))
    src = source(nats_server.url, "engine/app/config.json")
    config = DynamicConfig(None, "app").remote(src)
    asyncio.run(config.refresh_remote_async())
    assert config.init()["v"] == 1
    watch = config.watch_remote(interval=0.2)  # push watch + resync threads, own loops
    try:
        run(lambda: seed(b'{"app": {"v": 2}}'))  # delivery can beat a changed() call
        deadline = time.monotonic() + 10
        while config.current()["v"] != 2:
            assert time.monotonic() < deadline, "the change never reached the engine"
            config.changed(timeout=0.2)
        assert config.status().last_reason == "remote-changed"
    finally:
        watch.stop()
        watch.join(5)
        asyncio.run(src.aclose())


def _seeded(nats_server, name: str, value: bytes) -> str:
    async def seed() -> None:
        client = await admin(nats_server.url)
        kv = await bucket(client, name)
        await kv.put("app/config.json", value)
        await client.close()

    run(seed)
    return f"{name}/app/config.json"


def test_a_blocking_init_refuses_the_async_store_and_init_async_reads_it(nats_server):
    from dynconf.errors import BackendError

    key = _seeded(nats_server, "oneshot", b'{"app": {"v": 1}}')
    src = source(nats_server.url, key)
    try:
        config = DynamicConfig(None, "app").remote(src)
        with pytest.raises(BackendError, match=r"call `await init_async\(\)`"):
            config.init()
        with pytest.raises(BackendError, match=r"use refresh_remote_async\(\)"):
            config.refresh_remote()
        assert asyncio.run(config.init_async())["v"] == 1
        status = config.remote_status()
        assert status is not None and (status.fetches, status.consecutive_failures) == (1, 0)
    finally:
        asyncio.run(src.aclose())


def test_refresh_remote_async_keeps_the_new_document_for_the_next_load(nats_server):
    key = _seeded(nats_server, "oneshot2", b'{"app": {"v": 1}}')
    src = source(nats_server.url, key)
    try:
        config = DynamicConfig(None, "app").remote(src)
        assert asyncio.run(config.init_async())["v"] == 1
        _seeded(nats_server, "oneshot2", b'{"app": {"v": 2}}')
        asyncio.run(config.refresh_remote_async())
        assert config.current()["v"] == 1  # a refresh reloads nothing
        assert config.reload()["v"] == 2
    finally:
        asyncio.run(src.aclose())
