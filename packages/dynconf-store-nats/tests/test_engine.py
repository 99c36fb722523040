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
