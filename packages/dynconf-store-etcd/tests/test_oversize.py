"""A value past the document ceiling is refused while at most its bound has been read."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.errors import OversizeError
from dynconf.store_http import BODY_CHUNK
from dynconf.stores import Fetched
from dynconf_store_etcd.source import answer_bound

pytestmark = pytest.mark.etcd

CEILING = 64 * 1024
VALUE_BYTES = 1024 * 1024
"""Within etcd's default 1.5 MiB request limit."""
HEADROOM = 2 * BODY_CHUNK + 4096
"""What one bounded read may take past its bound: the chunk that crossed it, the socket
buffer's read-ahead, and the status line and headers."""


def unique() -> str:
    return f"/oversize/{uuid.uuid4().hex}/config.json"


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_value_past_the_ceiling_is_refused_within_the_bound(
    etcd_server: Any, kit: SimpleNamespace, received: Callable[[int], list[int]]
) -> None:
    key = unique()
    kit.put(etcd_server.url, key, '{"v": "' + "x" * VALUE_BYTES + '"}')
    source = kit.build(etcd_server.url, key, max_bytes=CEILING)
    total = received(_port(etcd_server.url))
    try:
        with pytest.raises(OversizeError) as refused:
            source.fetch()
    finally:
        source.close()
    assert total[0] <= answer_bound(CEILING, [key]).limit + HEADROOM
    assert total[0] < VALUE_BYTES
    assert f"past the {CEILING}-byte ceiling" in refused.value.message
    assert "eHh4" not in refused.value.message  # no base64 of the value either


def test_value_just_under_the_ceiling_still_reads(etcd_server: Any, kit: SimpleNamespace) -> None:
    key = unique()
    text = '{"v": "' + "x" * (CEILING - 16) + '"}'
    kit.put(etcd_server.url, key, text)
    source = kit.build(etcd_server.url, key, max_bytes=CEILING)
    try:
        answer = source.fetch()
    finally:
        source.close()
    assert isinstance(answer, Fetched)
    assert answer.text == text


def test_several_keys_past_the_ceiling_are_refused(etcd_server: Any, kit: SimpleNamespace) -> None:
    first, second = unique(), unique()
    kit.put(etcd_server.url, first, '{"a": 1}')
    kit.put(etcd_server.url, second, '{"v": "' + "x" * VALUE_BYTES + '"}')
    source = kit.build(etcd_server.url, first, keys=(first, second), max_bytes=CEILING)
    try:
        with pytest.raises(OversizeError):
            source.fetch()
    finally:
        source.close()


def test_watched_value_past_the_ceiling_is_reported_and_the_next_fitting_one_delivered(
    etcd_server: Any, kit: SimpleNamespace
) -> None:
    key = unique()
    kit.put(etcd_server.url, key, '{"v": 0}')
    with kit.Watch(kit.build(etcd_server.url, key, max_bytes=CEILING)) as watch:
        kit.put(etcd_server.url, key, '{"v": "' + "x" * VALUE_BYTES + '"}')
        deadline = time.monotonic() + 10
        while not any(isinstance(f, OversizeError) for f in watch.failures):
            assert time.monotonic() < deadline, "the oversize value was not reported"
            time.sleep(0.05)
        kit.put(etcd_server.url, key, '{"v": 2}')
        answer = watch.next(timeout=20)
    assert isinstance(answer, Fetched)
    assert answer.text == '{"v": 2}'
