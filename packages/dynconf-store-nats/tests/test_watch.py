"""The push watch: a KV watcher on the key, the KV revision, ABSENT on delete and purge."""

from __future__ import annotations

import asyncio
import time

import pytest
from natskit import Follower, admin, bucket, run, source

from dynconf.stores import ABSENT, Fetched, WatchCapability

pytestmark = pytest.mark.nats

KEY = "app/config.json"


def _watching(nats_server, name, scenario, *, seed: bytes | None = b'{"v": 0}'):
    async def wrapped():
        client = await admin(nats_server.url)
        kv = await bucket(client, name)
        if seed is not None:
            await kv.put(KEY, seed)
        follower = Follower(source(nats_server.url, f"{name}/{KEY}"))
        try:
            await follower.connected()
            return await scenario(kv, follower)
        finally:
            await follower.stop()
            await client.close()

    return run(wrapped)


def test_capability_is_push(nats_server):
    assert source(nats_server.url, f"w/{KEY}").capability is WatchCapability.PUSH


def test_change_is_delivered_with_its_kv_revision(nats_server):
    async def scenario(kv, follower):
        revision = await kv.put(KEY, b'{"v": 1}')
        return revision, await follower.next()

    revision, delivered = _watching(nats_server, "wchange", scenario)
    assert isinstance(delivered, Fetched)
    assert delivered.text == '{"v": 1}'
    assert delivered.numeric_revision == revision


def test_starting_value_is_not_announced(nats_server):
    async def scenario(_kv, follower):
        return await follower.quiet(1.5)

    assert _watching(nats_server, "wstart", scenario)


@pytest.mark.parametrize("how", ["delete", "purge"])
def test_delete_or_purge_is_absent_once_then_the_return(nats_server, how):
    async def scenario(kv, follower):
        await getattr(kv, how)(KEY)
        first = await follower.next()
        await kv.delete(KEY)  # deleting what is already gone moves nothing
        quiet = await follower.quiet(0.8)
        await kv.put(KEY, b'{"v": "back"}')
        return first, quiet, await follower.next()

    first, quiet, back = _watching(nats_server, f"w{how}", scenario)
    assert first is ABSENT
    assert quiet
    assert back.text == '{"v": "back"}'


def test_watch_of_a_never_written_key_delivers_its_creation(nats_server):
    async def scenario(kv, follower):
        assert await follower.quiet(0.5)
        await kv.put(KEY, b'{"born": true}')
        return await follower.next()

    assert _watching(nats_server, "wborn", scenario, seed=None).text == '{"born": true}'


def test_other_keys_of_the_bucket_are_not_delivered(nats_server):
    async def scenario(kv, follower):
        await kv.put("app/other.json", b"{}")
        return await follower.quiet(0.8)

    assert _watching(nats_server, "wother", scenario)


def test_burst_of_changes_is_delivered_in_order_ending_on_the_last(nats_server):
    async def scenario(kv, follower):
        for n in range(1, 21):
            await kv.put(KEY, f'{{"n": {n}}}'.encode())
        seen = []
        while not seen or seen[-1] != 20:
            seen.append(int((await follower.next()).text.split(":")[1].strip(" }")))
        return seen

    seen = _watching(nats_server, "wburst", scenario)
    assert seen == sorted(seen)


def test_cancelling_the_consumer_stops_the_watch_at_once(nats_server):
    async def scenario(_kv, follower):
        started = time.monotonic()
        follower.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follower.task
        return time.monotonic() - started

    assert _watching(nats_server, "wstop", scenario) < 0.5


def test_missing_bucket_ends_the_watch_with_the_refusal(nats_server):
    async def scenario():
        follower = Follower(source(nats_server.url, f"wnobucket/{KEY}"))
        try:
            await asyncio.wait_for(follower.task, 10)
            return follower.error
        finally:
            await follower.stop()

    error = run(scenario)
    assert error is not None
    assert "does not exist" in str(error)
