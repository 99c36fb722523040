"""``Nats(servers, key, ...)``: the typed constructor against a real nats-server."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from natskit import admin, bucket, run

from dynconf import DynamicConfig
from dynconf_store_nats import Nats

pytestmark = pytest.mark.nats


def seed(url: str, name: str, value: bytes, **options: Any) -> None:
    async def put() -> None:
        client = await admin(url, **options)
        kv = await bucket(client, name)
        await kv.put("app/config.json", value)
        await client.close()

    run(put)


def test_nats_constructor_loads_and_the_watch_sees_a_change(nats_server: Any) -> None:
    name = "ctor" + uuid.uuid4().hex[:8]
    seed(nats_server.url, name, b'{"app": {"v": 1}}')
    source = Nats(nats_server.url, f"{name}/app/config.json")
    config = DynamicConfig(None, "app").remote(source)
    assert asyncio.run(config.init_async())["v"] == 1
    watch = config.watch_remote(interval=0.2)
    try:
        seed(nats_server.url, name, b'{"app": {"v": 2}}')
        deadline = time.monotonic() + 10
        while config.current()["v"] != 2:
            assert time.monotonic() < deadline, "the change never reached the engine"
            config.changed(timeout=0.2)
    finally:
        watch.stop()
        watch.join(5)
        asyncio.run(source.aclose())


def test_nats_token_callable_is_asked_at_each_connect(nats_server: Any) -> None:
    name = "ctor" + uuid.uuid4().hex[:8]
    seed(nats_server.token_url, name, b'{"app": {"v": 3}}', token=nats_server.token)
    asked: list[int] = []

    def token() -> str:
        asked.append(1)
        return str(nats_server.token)

    async def twice() -> int:
        first = Nats(nats_server.token_url, f"{name}/app/config.json", token=token)
        config = DynamicConfig(None, "app").remote(first)
        value = (await config.init_async())["v"]
        await first.aclose()
        second = Nats(nats_server.token_url, f"{name}/app/config.json", token=token)
        await second.fetch()
        await second.aclose()
        return int(value)

    assert asyncio.run(twice()) == 3
    assert len(asked) == 2
