"""The consul_server fixture gives a working Consul: KV write, read and a blocking query."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.fixtures.servers import ConsulServer

pytestmark = pytest.mark.consul


def test_blocking_query_returns_the_new_value(consul_server: ConsulServer) -> None:
    kv = consul_server.client.kv
    key = f"smoke/{uuid.uuid4().hex}/app"
    assert kv.put(key, "v1")
    index, entry = kv.get(key)
    assert entry["Value"] == b"v1"

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(kv.get, key, index=index, wait="10s")
        assert kv.put(key, "v2")
        new_index, new_entry = waiting.result(timeout=15)

    assert new_entry["Value"] == b"v2"
    assert int(new_index) > int(index)
