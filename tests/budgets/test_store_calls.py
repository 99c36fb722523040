"""Store calls counted and budgeted in the follower, against a real Consul.

The 429 / 503 faults come from a loopback listener in front of the real server
(``tests/fixtures/hostile.py``), because the real server will not produce them on demand:
it answers the throttle for the first requests and relays the rest to Consul.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from dynconf.budget import Budget, BudgetExceeded, CallLedger, StoreCalls
from dynconf.errors import ThrottledError
from dynconf.follow import StoreDriver, fetch_once
from dynconf.plugins import default_registry
from dynconf.stores import Fetched, StoreSpec
from tests.fixtures.hostile import Listener, request_path
from tests.fixtures.relay import Relay


def consul_source(endpoint: str, key: str) -> Any:
    spec = StoreSpec(source="consul", endpoint=endpoint, key=key)
    return default_registry().store("consul").build(spec)


@pytest.fixture
def key(consul_server: Any) -> Iterator[str]:
    name = f"budgets/{uuid.uuid4().hex}.json"
    consul_server.client.kv.put(name, json.dumps({"db": {"host": "db-1"}}))
    yield name
    consul_server.client.kv.delete(name)


def test_every_one_shot_read_is_counted_once_by_its_answer(consul_server: Any, key: str) -> None:
    calls = CallLedger().account("consul", consul_server.url)
    source = consul_source(consul_server.url, key)
    missing = consul_source(consul_server.url, "gone-" + key.replace("/", "-"))
    try:
        for _ in range(5):
            assert isinstance(fetch_once(source, calls=calls), Fetched)
        fetch_once(missing, calls=calls)
    finally:
        source.close()
        missing.close()
    assert calls.counts() == {
        "ok": 5, "not_found": 1, "unauthorized": 0, "throttled": 0, "error": 0, "budget": 0
    }  # fmt: skip


def test_driver_reads_wait_for_the_budget_and_are_all_sent(consul_server: Any, key: str) -> None:
    calls = StoreCalls("consul", consul_server.url, Budget(rate=20.0, burst=2))
    driver = StoreDriver(consul_source(consul_server.url, key), calls=calls)

    async def read_six() -> float:
        started = time.monotonic()
        for _ in range(6):
            await driver.fetch()
        took = time.monotonic() - started
        await driver.close()
        return took

    took = anyio.run(read_six)
    assert took >= (6 - 2) / 20.0 * 0.9  # four calls past the burst, 50 ms apart
    assert calls.counts()["ok"] == 6
    assert calls.counts()["budget"] == 4


def test_read_past_the_bound_is_not_sent(consul_server: Any, key: str) -> None:
    seen: list[bytes] = []
    front = relaying_listener(consul_server, seen, throttle=0)
    calls = StoreCalls("consul", front.url, Budget(rate=0.5, burst=1), max_wait=0.2)
    source = consul_source(front.url, key)
    try:
        fetch_once(source, calls=calls)
        with pytest.raises(BudgetExceeded):
            fetch_once(source, calls=calls)
    finally:
        source.close()
        front.close()
    assert len(seen) == 1
    assert calls.counts()["ok"] == 1 and calls.counts()["budget"] == 1


@pytest.mark.parametrize("status", [429, 503])
def test_throttled_answer_is_counted_and_its_retry_after_holds_the_next_call(
    consul_server: Any, key: str, status: int
) -> None:
    seen: list[bytes] = []
    front = relaying_listener(consul_server, seen, throttle=1, status=status, retry_after=1)
    calls = StoreCalls("consul", front.url)  # no budget: the store's own ask still holds
    source = consul_source(front.url, key)
    try:
        with pytest.raises(ThrottledError) as caught:
            fetch_once(source, calls=calls)
        assert caught.value.retry_after == 1.0
        started = time.monotonic()
        assert isinstance(fetch_once(source, calls=calls), Fetched)
        waited = time.monotonic() - started
    finally:
        source.close()
        front.close()
    assert waited >= 0.9
    assert len(seen) == 2
    assert calls.counts()["throttled"] == 1 and calls.counts()["ok"] == 1


def test_a_throttling_relay_answers_503_until_restored_and_then_relays(
    consul_server: Any, key: str
) -> None:
    relay = Relay(consul_server.port)
    calls = StoreCalls("consul", relay.url)
    source = consul_source(relay.url, key)
    try:
        assert isinstance(fetch_once(source, calls=calls), Fetched)
        relay.throttle(503, retry_after=1)
        with pytest.raises(ThrottledError) as caught:
            fetch_once(source, calls=calls)
        relay.restore()
        started = time.monotonic()
        assert isinstance(fetch_once(source, calls=calls), Fetched)
        waited = time.monotonic() - started
    finally:
        source.close()
        relay.close()
    assert caught.value.retry_after == 1.0
    assert len(relay.refused) == 1
    assert waited >= 0.9, "the store's Retry-After held the next call"
    assert calls.counts()["ok"] == 2 and calls.counts()["throttled"] == 1


def relaying_listener(
    consul_server: Any,
    seen: list[bytes],
    *,
    throttle: int,
    status: int = 429,
    retry_after: int | None = None,
) -> Listener:
    """Answer the first ``throttle`` requests with ``status``, relay the rest to Consul."""

    def reply(request: bytes) -> bytes:
        seen.append(request)
        if len(seen) <= throttle:
            after = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
            return (
                f"HTTP/1.1 {status} Slow Down\r\n{after}Content-Length: 0\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
        method = request.split(b" ", 1)[0].decode()
        upstream = http.client.HTTPConnection(consul_server.host, consul_server.port, timeout=10)
        try:
            upstream.request(method, request_path(request))
            answer = upstream.getresponse()
            body = answer.read()
            headers = "".join(
                f"{name}: {value}\r\n"
                for name, value in answer.getheaders()
                if name.lower() not in ("content-length", "connection", "transfer-encoding")
            )
        finally:
            upstream.close()
        return (
            f"HTTP/1.1 {answer.status} {answer.reason}\r\n{headers}"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body

    return Listener("127.0.0.1", reply)
