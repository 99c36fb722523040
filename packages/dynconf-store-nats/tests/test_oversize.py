"""A value past the document ceiling is refused before it is decoded (the server bounds the
read by its ``max_payload``); a watch reports it and delivers the next value that fits."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from natskit import Follower, admin, bucket, run, source

from dynconf.errors import OversizeError
from dynconf.stores import Fetched

pytestmark = pytest.mark.nats

KEY = "app/config.json"
CEILING = 64 * 1024
VALUE_BYTES = 512 * 1024
"""Past the ceiling and within the server's default 1 MiB max_payload."""


def _name() -> str:
    return "big" + uuid.uuid4().hex[:10]


def _oversize() -> bytes:
    return b'{"v": "' + b"x" * VALUE_BYTES + b'"}'


def _fetch(nats_server, value: bytes):
    async def scenario():
        client = await admin(nats_server.url)
        name = _name()
        kv = await bucket(client, name)
        await kv.put(KEY, value)
        src = source(nats_server.url, f"{name}/{KEY}", max_bytes=CEILING)
        try:
            return await src.fetch()
        finally:
            await src.aclose()
            await client.close()

    return run(scenario)


def test_value_past_the_ceiling_is_refused(nats_server):
    with pytest.raises(OversizeError) as refused:
        _fetch(nats_server, _oversize())
    assert f"answered with {VALUE_BYTES + 9} bytes" in refused.value.message
    assert f"past the {CEILING}-byte ceiling" in refused.value.message
    assert "xxxx" not in refused.value.message


def test_value_just_under_the_ceiling_still_reads(nats_server):
    value = b"x" * CEILING
    answer = _fetch(nats_server, value)
    assert isinstance(answer, Fetched)
    assert answer.text.encode() == value


def test_watched_value_past_the_ceiling_is_reported_and_the_watch_goes_on(nats_server):
    async def scenario():
        client = await admin(nats_server.url)
        name = _name()
        kv = await bucket(client, name)
        await kv.put(KEY, b'{"v": 0}')
        follower = Follower(source(nats_server.url, f"{name}/{KEY}", max_bytes=CEILING))
        try:
            await follower.connected()
            await kv.put(KEY, _oversize())
            deadline = time.monotonic() + 10
            while not any(isinstance(f, OversizeError) for f in follower.failures):
                assert time.monotonic() < deadline, "the oversize value was not reported"
                await asyncio.sleep(0.02)
            await kv.put(KEY, b'{"v": 2}')
            return await follower.next(), follower.error
        finally:
            await follower.stop()
            await client.close()

    delivered, error = run(scenario)
    assert error is None
    assert isinstance(delivered, Fetched)
    assert delivered.text == '{"v": 2}'
