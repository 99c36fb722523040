"""Reading one KV key: the document, its KV revision, ABSENT, a missing bucket, bad values."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from natskit import admin, bucket, run, source

from dynconf.errors import BackendError, RemoteError
from dynconf.stores import ABSENT, Fetched, is_async_source

pytestmark = pytest.mark.nats

KEY = "app/config.json"


def _with_bucket(nats_server, name, scenario):
    async def wrapped():
        client = await admin(nats_server.url)
        kv = await bucket(client, name)
        src = source(nats_server.url, f"{name}/{KEY}")
        try:
            return await scenario(kv, src, client)
        finally:
            await src.aclose()
            await client.close()

    return run(wrapped)


def test_source_is_async(nats_server):
    assert is_async_source(source(nats_server.url, f"kv/{KEY}"))


def test_fetch_reads_the_document_with_its_kv_revision(nats_server):
    async def scenario(kv, src, _client):
        revision = await kv.put(KEY, b'{"a": 1}')
        return revision, await src.fetch()

    revision, answer = _with_bucket(nats_server, "kvread", scenario)
    assert isinstance(answer, Fetched)
    assert (answer.text, answer.format) == ('{"a": 1}', "json")
    assert answer.numeric_revision == revision


def test_format_setting_overrides_a_key_without_extension(nats_server):
    async def scenario(kv, _src, _client):
        await kv.put("app/settings", b"a = 1")
        src = source(nats_server.url, "kvfmt/app/settings", extra={"format": "toml"})
        try:
            return await src.fetch()
        finally:
            await src.aclose()

    assert _with_bucket(nats_server, "kvfmt", scenario).format == "toml"


def test_never_written_key_is_absent(nats_server):
    async def scenario(_kv, src, _client):
        return await src.fetch()

    assert _with_bucket(nats_server, "kvnever", scenario) is ABSENT


@pytest.mark.parametrize("how", ["delete", "purge"])
def test_deleted_or_purged_key_is_absent(nats_server, how):
    async def scenario(kv, src, _client):
        await kv.put(KEY, b"{}")
        assert isinstance(await src.fetch(), Fetched)
        await getattr(kv, how)(KEY)
        return await src.fetch()

    assert _with_bucket(nats_server, f"kv{how}", scenario) is ABSENT


def test_missing_bucket_is_refused_and_never_created(nats_server):
    import nats.js.errors

    async def scenario():
        src = source(nats_server.url, f"nosuchbucket/{KEY}")
        client = await admin(nats_server.url)
        try:
            with pytest.raises(RemoteError, match="does not exist; create it") as caught:
                await src.fetch()
            with pytest.raises(nats.js.errors.BucketNotFoundError):
                await client.jetstream().key_value("nosuchbucket")
            return caught.value
        finally:
            await src.aclose()
            await client.close()

    error = run(scenario)
    assert "nats kv add nosuchbucket" in str(error)


def test_value_that_is_not_utf8_is_a_remote_error_without_the_value(nats_server):
    async def scenario(kv, src, _client):
        await kv.put(KEY, b"\xff\xfe secret-bytes")
        with pytest.raises(RemoteError, match="not UTF-8") as caught:
            await src.fetch()
        return str(caught.value)

    assert "secret-bytes" not in _with_bucket(nats_server, "kvbytes", scenario)


def test_unreachable_server_is_a_prompt_remote_error():
    async def scenario():
        src = source("nats://127.0.0.1:1", f"kv/{KEY}", timeout=2)
        try:
            await src.fetch()
        finally:
            await src.aclose()

    started = time.monotonic()
    with pytest.raises(RemoteError, match="cannot be reached"):
        run(scenario)
    assert time.monotonic() - started < 5


def test_build_does_no_io():
    src = source("nats://127.0.0.1:1", f"kv/{KEY}")
    assert src.connects == 0
    assert not src._home.running


def test_one_source_serves_several_event_loops(nats_server):
    """The engine fetches from its resync thread's loop and watches from another."""
    src = source(nats_server.url, f"kvloops/{KEY}")

    async def seed():
        client = await admin(nats_server.url)
        kv = await bucket(client, "kvloops")
        await kv.put(KEY, b'{"loops": true}')
        await client.close()

    run(seed)
    answers = [asyncio.run(src.fetch()), asyncio.run(src.fetch())]
    box = []
    thread = threading.Thread(target=lambda: box.append(asyncio.run(src.fetch())))
    thread.start()
    thread.join(10)
    answers.extend(box)
    assert [a.text for a in answers] == ['{"loops": true}'] * 3
    assert src.connects == 1
    asyncio.run(src.aclose())


def test_closed_source_refuses_use(nats_server):
    src = source(nats_server.url, f"kv/{KEY}")
    asyncio.run(src.aclose())
    with pytest.raises(BackendError, match="closed"):
        asyncio.run(src.fetch())
