"""Faults against a real server: restarted mid-watch, and a change made before the watch is back."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from natskit import Follower, admin, bucket, run, source

from dynconf.errors import RemoteError
from dynconf.stores import ABSENT, Fetched

pytestmark = [pytest.mark.nats, pytest.mark.slow]

KEY = "faults/app/config.json"


async def _seed(url: str, value: bytes | None) -> int:
    client = await admin(url)
    try:
        kv = await bucket(client, "faults")
        if value is None:
            return int(await kv.delete("app/config.json") or 0)
        return int(await kv.put("app/config.json", value))
    finally:
        await client.close()


async def _wait_failure(follower: Follower) -> None:
    while not follower.failures:
        assert follower.error is None, follower.error
        await asyncio.sleep(0.05)


def test_server_restarted_mid_watch_reconnects_and_delivers_the_next_change(own_nats):
    server = own_nats()

    async def scenario():
        await _seed(server.url, b'{"v": 1}')
        src = source(server.url, KEY, timeout=2)
        src.reconnect_base = 0.2
        follower = Follower(src)
        try:
            await follower.connected()
            server.kill()
            await _wait_failure(follower)
            assert isinstance(follower.failures[0], RemoteError)
            assert src.connected is False
            server.start()  # same port, same store directory: revisions carry on
            await follower.connected(timeout=30)
            revision = await _seed(server.url, b'{"v": 2}')
            delivered = await follower.next(timeout=15)
            assert follower.error is None
            return revision, delivered
        finally:
            await follower.stop()

    revision, delivered = run(scenario)
    assert isinstance(delivered, Fetched)
    assert delivered.text == '{"v": 2}'
    assert delivered.numeric_revision == revision


def test_change_made_before_the_watch_reconnects_is_delivered_after(own_nats):
    server = own_nats()

    async def scenario():
        await _seed(server.url, b'{"v": 1}')
        src = source(server.url, KEY, timeout=2)
        src.reconnect_base = 1.5  # the first reconnect waits ~3 s: long enough to write first
        follower = Follower(src)
        try:
            await follower.connected()
            server.kill()
            await _wait_failure(follower)
            server.start()
            await _seed(server.url, b'{"v": "written while the watch was away"}')
            assert not src.connected
            first = await follower.next(timeout=30)
            await _seed(server.url, None)  # and the stream carries on afterwards
            second = await follower.next(timeout=15)
            return first, second
        finally:
            await follower.stop()

    first, second = run(scenario)
    assert first.text == '{"v": "written while the watch was away"}'
    assert second is ABSENT


def test_failures_are_reported_with_backoff_while_the_server_is_down(own_nats):
    server = own_nats()

    async def scenario():
        await _seed(server.url, b"{}")
        src = source(server.url, KEY, timeout=1)
        src.reconnect_base = 0.1
        follower = Follower(src)
        try:
            await follower.connected()
            server.kill()
            loop = asyncio.get_running_loop()
            stamps = []
            while len(stamps) < 4:
                await _wait_failure(follower)
                stamps.append(loop.time())
                follower.failures.clear()
            return [b - a for a, b in itertools.pairwise(stamps)]
        finally:
            await follower.stop()

    gaps = run(scenario)
    assert gaps[-1] > gaps[0], f"no backoff: {gaps}"
