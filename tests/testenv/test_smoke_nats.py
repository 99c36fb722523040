"""The nats_server fixture gives a working NATS JetStream: KV put, get and watch."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tests.fixtures.servers import NatsServer

pytestmark = pytest.mark.nats


async def _put_get_watch(server: NatsServer, *, with_token: bool) -> None:
    nc = await server.connect(with_token=with_token)
    try:
        js = nc.jetstream()
        kv = await js.create_key_value(bucket=f"smoke-{uuid.uuid4().hex[:12]}", history=5)
        first = await kv.put("app.key", b"v1")
        assert (await kv.get("app.key")).value == b"v1"

        watcher: Any = await kv.watch("app.key")  # nats-py leaves its watcher untyped
        current = await watcher.updates(timeout=5)
        assert current is not None
        assert current.revision == first
        assert await watcher.updates(timeout=5) is None  # end of the initial values

        second = await kv.put("app.key", b"v2")
        update = await watcher.updates(timeout=5)
        assert update is not None
        assert (update.value, update.revision) == (b"v2", second)
        await watcher.stop()
    finally:
        await nc.close()


def test_kv_watch_sees_the_next_put(nats_server: NatsServer) -> None:
    asyncio.run(asyncio.wait_for(_put_get_watch(nats_server, with_token=False), 30))


def test_token_server_accepts_the_token(nats_server: NatsServer) -> None:
    asyncio.run(asyncio.wait_for(_put_get_watch(nats_server, with_token=True), 30))
