"""A value past the document ceiling is refused while at most its bound has been read.

Consul answers a KV read with a chunked body, so the real agent exercises the read of unknown
length; a loopback fake stands in for the one thing it will not send on demand: an answer that
declares a ``Content-Length`` past the bound (refused before its body is read).
"""

from __future__ import annotations

import uuid

import pytest

from dynconf.errors import OversizeError
from dynconf.store_http import BODY_CHUNK
from dynconf.stores import Fetched
from dynconf_store_consul.transport import answer_bound
from tests.fixtures.hostile import Listener

pytestmark = pytest.mark.consul

CEILING = 64 * 1024
VALUE_BYTES = 400 * 1024
"""Past the ceiling and within the agent's default 512 KiB value limit."""
HEADROOM = 2 * BODY_CHUNK + 4096
"""What one bounded read may take past its bound: the chunk that crossed it, the socket
buffer's read-ahead, and the status line and headers."""


def _key() -> str:
    return f"oversize/{uuid.uuid4().hex}/config.json"


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_value_past_the_ceiling_is_refused_within_the_bound(plain_consul, make_source, received):
    key = _key()
    plain_consul.put(key, '{"v": "' + "x" * VALUE_BYTES + '"}')
    source = make_source(plain_consul.url, key, max_bytes=CEILING)
    counter = received(_port(plain_consul.url))
    with pytest.raises(OversizeError) as refused:
        source.fetch()
    limit = answer_bound(CEILING, [key]).limit
    assert counter[0] <= limit + HEADROOM
    assert counter[0] < VALUE_BYTES  # the whole answer (4/3 of it) was never held
    assert f"past the {CEILING}-byte ceiling" in refused.value.message
    assert "xxxx" not in refused.value.message


def test_value_just_under_the_ceiling_still_reads(plain_consul, make_source):
    key = _key()
    text = '{"v": "' + "x" * (CEILING - 16) + '"}'
    plain_consul.put(key, text)
    answer = make_source(plain_consul.url, key, max_bytes=CEILING).fetch()
    assert isinstance(answer, Fetched)
    assert answer.text == text


def test_refused_answer_drops_its_connection_and_the_next_read_works(plain_consul, make_source):
    key = _key()
    plain_consul.put(key, '{"v": "' + "x" * VALUE_BYTES + '"}')
    source = make_source(plain_consul.url, key, max_bytes=CEILING)
    with pytest.raises(OversizeError):
        source.fetch()
    plain_consul.put(key, '{"v": 1}')
    answer = source.fetch()
    assert isinstance(answer, Fetched)
    assert answer.text == '{"v": 1}'


def test_several_keys_past_the_ceiling_are_refused(plain_consul, make_source):
    base = f"oversize/{uuid.uuid4().hex}"
    first, second = f"{base}/a.json", f"{base}/b.json"
    plain_consul.put(first, '{"a": 1}')
    plain_consul.put(second, '{"v": "' + "x" * VALUE_BYTES + '"}')
    source = make_source(plain_consul.url, first, keys=(first, second), max_bytes=CEILING)
    with pytest.raises(OversizeError):
        source.fetch()


def test_declared_length_past_the_bound_is_refused_unread(make_source, received):
    declared = 512 * 1024 * 1024

    def huge(_request: bytes) -> bytes:
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Consul-Index: 7\r\n"
            f"Content-Length: {declared}\r\n\r\n"
        ).encode()
        return head + b'[{"Key": "k", "Value": "' + b"QUFB" * (256 * 1024)

    agent = Listener("127.0.0.1", huge)
    try:
        source = make_source(agent.url, _key(), max_bytes=CEILING)
        counter = received(agent.port)
        with pytest.raises(OversizeError) as refused:
            source.fetch()
    finally:
        agent.close()
    assert counter[0] <= HEADROOM  # headers, and no more than one read-ahead of body
    assert f"answered with {declared} bytes" in refused.value.message
