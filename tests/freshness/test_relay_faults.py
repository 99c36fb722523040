"""The relay's black-hole faults themselves, against a loopback server of the test's own.

What the freshness tests rely on: a stalled or black-holed connection stays open (no RST,
no FIN: a read on it times out rather than ending) and forwards nothing, a new connection
passes after :meth:`Relay.stall` and after :meth:`Relay.restore`, and a stalled connection
stays dead after a restore, as its docstring says.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from tests.fixtures.relay import Relay

SILENCE = 0.5
"""Seconds a read waits to call a connection silent (open, nothing forwarded)."""


@pytest.fixture
def upstream() -> Iterator[socket.socket]:
    """A listening socket the test accepts on itself (the relay dials it once per client)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(5)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def relay(upstream: socket.socket) -> Iterator[Relay]:
    made = Relay(upstream.getsockname()[1])
    try:
        yield made
    finally:
        made.close()


@contextlib.contextmanager
def pair(relay: Relay, upstream: socket.socket) -> Iterator[tuple[socket.socket, socket.socket]]:
    """``(client, server)``: one connection through the relay, both ends in the test's hands."""
    client = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
    server, _ = upstream.accept()
    server.settimeout(5)
    try:
        yield client, server
    finally:
        client.close()
        server.close()


def silent(sock: socket.socket) -> bool:
    """Open and forwarding nothing: a read neither gets bytes nor sees the peer end."""
    sock.settimeout(SILENCE)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    else:
        return False  # bytes came through, or the peer ended it
    finally:
        sock.settimeout(5)


def passes(client: socket.socket, server: socket.socket) -> bool:
    client.sendall(b"ping")
    server.sendall(b"pong")
    return server.recv(4) == b"ping" and client.recv(4) == b"pong"


def test_a_stall_silences_open_connections_and_lets_new_ones_pass(
    relay: Relay, upstream: socket.socket
) -> None:
    with pair(relay, upstream) as (old_client, old_server):
        assert passes(old_client, old_server)
        relay.stall()
        old_client.sendall(b"lost")
        old_server.sendall(b"lost")
        assert silent(old_client) and silent(old_server)
        with pair(relay, upstream) as (client, server):
            assert passes(client, server)
        relay.restore()
        assert silent(old_client), "a stalled connection stays dead after restore()"


def test_a_stalled_connection_does_not_tell_the_client_its_server_went_away(
    relay: Relay, upstream: socket.socket
) -> None:
    with pair(relay, upstream) as (client, server):
        relay.stall()
        server.close()
        assert silent(client)


def test_a_blackhole_accepts_new_connections_and_holds_them_silent(
    relay: Relay, upstream: socket.socket
) -> None:
    with pair(relay, upstream) as (old_client, old_server):
        relay.blackhole()
        held = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
        with held:
            held.sendall(b"lost")
            assert silent(held)
            upstream.settimeout(SILENCE)
            with pytest.raises(TimeoutError):
                upstream.accept()  # nothing was dialled for it
            upstream.settimeout(5)
            old_client.sendall(b"lost")
            assert silent(old_client) and silent(old_server)
            relay.restore()
            with pair(relay, upstream) as (client, server):
                assert passes(client, server)
            assert silent(held) and silent(old_client), "restore() revives no held connection"


def ended(sock: socket.socket) -> bool:
    """The peer ended the connection: a FIN, or a reset (one still in the backlog gets one)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_close_ends_stalled_and_held_connections(relay: Relay, upstream: socket.socket) -> None:
    with pair(relay, upstream) as (client, _server):
        relay.blackhole()
        held = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
        with held:
            relay.close()
            assert ended(client)
            assert ended(held)
