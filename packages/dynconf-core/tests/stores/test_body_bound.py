"""The one bounded read of a store's HTTP answer: a declared length past the bound is refused
unread, a chunked body is stopped at the bound, and either way the connection is dropped.

A loopback listener stands in for a store here: no real store answers chunked on demand.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from dynconf.errors import Origin, OversizeError
from dynconf.store_http import BODY_CHUNK, BodyBound, HttpPolicy, store_session
from tests.fixtures.hostile import Listener

CEILING = 64 * 1024
BOUND = BodyBound.for_documents(CEILING, expansion=Fraction(4, 3), envelope=1024)
HEADROOM = 2 * BODY_CHUNK + 4096
"""What one bounded read may take past its bound: the chunk that crossed it, the socket
buffer's read-ahead, and the status line and headers."""


def test_bound_is_the_expanded_ceiling_plus_the_envelope() -> None:
    assert BOUND.limit == 87382 + 1024
    assert BodyBound.for_documents(
        CEILING, expansion=Fraction(6), envelope=0, documents=2
    ).limit == (2 * 6 * CEILING)


def test_expansion_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        BodyBound.for_documents(CEILING, expansion=Fraction(1, 2), envelope=0)


def test_read_within_the_bound_joins_the_chunks() -> None:
    assert BOUND.read([b"ab", b"cd"]) == b"abcd"


def test_read_stops_at_the_chunk_that_passes_the_bound() -> None:
    taken: list[int] = []

    def chunks() -> Iterator[bytes]:
        for index in range(100):
            taken.append(index)
            yield b"x" * BODY_CHUNK

    with pytest.raises(OversizeError) as refused:
        BOUND.read(chunks())
    assert len(taken) == 2  # the second chunk crossed the bound; no third was asked for
    assert refused.value.message == (
        f"the store answered with {2 * BODY_CHUNK} bytes, past the {CEILING}-byte ceiling; "
        "raise it with --max-document-bytes if the document is meant to be that large"
    )


def test_declared_length_within_the_bound_passes_and_one_past_it_is_refused() -> None:
    BOUND.check_length(str(BOUND.limit))
    BOUND.check_length(None)
    BOUND.check_length("not a number")
    with pytest.raises(OversizeError, match=f"answered with {BOUND.limit + 1} bytes"):
        BOUND.check_length(str(BOUND.limit + 1))


def _chunked(total: int, piece: int = 16 * 1024) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = f"{piece:x}\r\n".encode() + b"x" * piece + b"\r\n"
    return head + chunk * (total // piece) + b"0\r\n\r\n"


def _sized(body: bytes, declared: int | None = None) -> bytes:
    length = len(body) if declared is None else declared
    return f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n".encode() + body


def _session(url: str) -> Any:
    return store_session(
        HttpPolicy(), endpoint=url, subject="store", origin=Origin.remote("store"), bound=BOUND
    )


def test_chunked_answer_past_the_bound_is_stopped_at_it(received: Any) -> None:
    store = Listener("127.0.0.1", lambda _request: _chunked(8 * 1024 * 1024))
    try:
        total = received(store.port)
        with _session(store.url) as session, pytest.raises(OversizeError):
            session.get(store.url + "/kv")
    finally:
        store.close()
    assert total[0] <= BOUND.limit + HEADROOM


def test_declared_length_past_the_bound_is_refused_unread(received: Any) -> None:
    declared = 256 * 1024 * 1024
    store = Listener("127.0.0.1", lambda _request: _sized(b"x" * (1024 * 1024), declared))
    try:
        total = received(store.port)
        with _session(store.url) as session, pytest.raises(OversizeError) as refused:
            session.get(store.url + "/kv")
    finally:
        store.close()
    assert total[0] <= HEADROOM
    assert f"answered with {declared} bytes" in refused.value.message


def test_refused_answer_drops_its_connection_and_the_next_answer_reads() -> None:
    replies = iter([_chunked(8 * 1024 * 1024), _sized(b'{"v": 1}')])
    store = Listener("127.0.0.1", lambda _request: next(replies))
    try:
        with _session(store.url) as session:
            with pytest.raises(OversizeError):
                session.get(store.url + "/kv")
            # the refused answer's connection was dropped, not reused half-read
            answer = session.get(store.url + "/kv")
    finally:
        store.close()
    assert answer.content == b'{"v": 1}'
    assert len(store.seen) == 2


def test_chunked_answer_within_the_bound_is_read_whole() -> None:
    store = Listener("127.0.0.1", lambda _request: _chunked(BOUND.limit - 1024))
    try:
        with _session(store.url) as session:
            answer = session.get(store.url + "/kv")
    finally:
        store.close()
    assert len(answer.content) == (BOUND.limit - 1024) // (16 * 1024) * 16 * 1024


def test_a_stream_is_left_to_its_reader() -> None:
    store = Listener("127.0.0.1", lambda _request: _chunked(4 * BOUND.limit))
    try:
        with _session(store.url) as session:
            answer = session.get(store.url + "/watch", stream=True)
            read = sum(len(chunk) for chunk in answer.iter_content(BODY_CHUNK))
            answer.close()
    finally:
        store.close()
    assert read > BOUND.limit


def test_bound_below_its_ceiling_is_refused() -> None:
    with pytest.raises(ValueError):
        BodyBound(ceiling=CEILING, limit=CEILING - 1)
