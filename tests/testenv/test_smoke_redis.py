"""The redis_server fixture gives a working Redis: keyspace notifications and TLS."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.fixtures.servers import RedisServer

pytestmark = pytest.mark.redis


def test_set_publishes_a_keyspace_notification(redis_server: RedisServer) -> None:
    client: Any = redis_server.client  # redis-py leaves pubsub() untyped
    key = f"smoke:{uuid.uuid4().hex}"
    pubsub = client.pubsub()
    try:
        pubsub.psubscribe(f"__keyspace@0__:{key}")
        confirm = pubsub.get_message(timeout=5)
        assert confirm is not None
        assert confirm["type"] == "psubscribe"

        client.set(key, "v1")

        deadline = time.monotonic() + 5
        event = None
        while event is None and time.monotonic() < deadline:
            event = pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
        assert event is not None
        assert event["channel"] == f"__keyspace@0__:{key}".encode()
        assert event["data"] == b"set"
        assert client.get(key) == b"v1"
    finally:
        pubsub.close()


def test_tls_port_verifies_against_the_test_ca(redis_server: RedisServer) -> None:
    client = redis_server.tls_client()
    try:
        assert client.ping()
        key = f"smoke:tls:{uuid.uuid4().hex}"
        client.set(key, "secure")
        assert redis_server.client.get(key) == b"secure"
    finally:
        client.close()
