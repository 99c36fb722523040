"""One connection per watched key: it holds the keyspace subscription and, under RESP3, reads too.

Under RESP2 a subscribed connection may issue nothing but (un)subscribe and PING, so reading
the key after a notification needs a second connection; a node agent watching 50 documents
then holds 100. RESP3 (Redis 6 and later, HELLO 3) lifts that: notifications arrive as push
frames between replies, and the same connection answers ``GET``. :class:`Subscription` uses
that when the server speaks it, and falls back to the classic pair when ``HELLO 3`` is refused
(an older server or a proxy that blocks it), saying which through :attr:`Subscription.reads`.

Several threads may use one subscription: the watch thread waits for notifications, a resync
or catch-up read from the follower asks for the key. A lock serialises every use of the
connection (redis-py's connection is not thread-safe), and the wait sleeps in ``poll`` on
the socket with the lock released, so a read never waits for a notification's slice. A
notification that arrives while another thread reads is kept and answered by the next wait.
``poll``, not ``select``: a node agent holding a connection per document passes descriptor
1024, which ``select`` refuses.
"""

from __future__ import annotations

import contextlib
import select
import threading
import time
from collections.abc import Callable
from typing import Any, Final

__all__ = ["Subscription", "SubscriptionClosed"]

MESSAGE: Final = b"message"
SUBSCRIBE: Final = b"subscribe"


class SubscriptionClosed(Exception):
    """The subscription's connection is closed or lost; read the key another way."""


class Subscription:
    """A confirmed subscription to one keyspace channel, on a connection of its own."""

    def __init__(self, connection: Any, channel: str, *, reads: bool) -> None:
        self._connection = connection
        self._channel = channel.encode()
        self.reads = reads
        """Whether :meth:`get` may be used (the connection speaks RESP3)."""
        self._lock = threading.Lock()
        self._pending = False
        self._closed = False
        self._poller = select.poll()
        sock = self._socket()
        if sock is not None:
            self._poller.register(sock, select.POLLIN)

    @classmethod
    def open(
        cls,
        connect: Callable[[int], Any],
        channel: str,
        *,
        timeout: float,
        refused_hello: Callable[[BaseException], bool],
        before: Callable[[Subscription], None] | None = None,
    ) -> Subscription:
        """Connect (RESP3 first, RESP2 when ``HELLO 3`` is refused) and subscribe.

        ``connect(protocol)`` returns a connected redis-py connection; ``refused_hello``
        tells a refused ``HELLO`` from any other failure, which propagates. ``before`` runs
        on the connection before it subscribes (the server's settings are checked there, so
        the check needs no connection of its own).
        """
        try:
            connection, reads = connect(3), True
        except Exception as exc:
            if not refused_hello(exc):
                raise
            connection, reads = connect(2), False
        subscription = cls(connection, channel, reads=reads)
        try:
            if before is not None:
                before(subscription)
            subscription._confirm(timeout)
        except BaseException:
            subscription.close()
            raise
        return subscription

    def config_get(self, name: str) -> str | None:
        """``CONFIG GET name`` on this connection, before it subscribes (any protocol's shape)."""
        with self._lock:
            self._connection.send_command("CONFIG", "GET", name)
            answer = self._connection.read_response()
        if isinstance(answer, dict):
            values = list(answer.values())
        elif isinstance(answer, list):
            values = answer[1::2]
        else:
            values = []
        if not values:
            return None
        value = values[0]
        return value.decode() if isinstance(value, bytes) else str(value)

    def _confirm(self, timeout: float) -> None:
        with self._lock:
            self._connection.send_command("SUBSCRIBE", self._channel)
            deadline = time.monotonic() + timeout
            while True:
                reply = self._connection.read_response(push_request=True)
                if _kind(reply) == SUBSCRIBE:
                    return
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"no subscribe confirmation within {timeout:g} s")

    def get(self, key: str) -> Any:
        """``GET key`` on the subscribed connection (RESP3 only); a notification met is kept."""
        return self.command("GET", key)

    def command(self, *args: str) -> Any:
        """One reading command (``GET``, ``STRLEN``) on the subscribed connection (RESP3
        only); its reply, or redis-py's error for an error reply. A notification met on the
        way is kept for the next :meth:`wait`."""
        if not self.reads:
            raise SubscriptionClosed("this connection speaks RESP2 and cannot read")
        with self._lock:
            self._usable()
            self._connection.send_command(*args)
            while True:
                reply = self._connection.read_response(push_request=True)
                kind = _kind(reply)
                if kind is None:
                    return reply
                if kind == MESSAGE:
                    self._pending = True

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True when the channel was notified.

        Raises :class:`SubscriptionClosed` (or redis-py's error) when the connection is gone.
        """
        with self._lock:
            if self._take_pending() or self._read_buffered():
                return True
        if not self._poller.poll(timeout * 1000):
            return False
        with self._lock:
            return self._take_pending() or self._read_buffered()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            with contextlib.suppress(Exception):  # a dead connection may refuse to close
                self._connection.disconnect()

    # -- under the lock -----------------------------------------------------------------

    def _take_pending(self) -> bool:
        pending, self._pending = self._pending, False
        return pending

    def _read_buffered(self) -> bool:
        """Read what has arrived already, without blocking; True for a notification."""
        self._usable()
        notified = False
        while self._connection.can_read(timeout=0):
            if _kind(self._connection.read_response(push_request=True)) == MESSAGE:
                notified = True
        return notified

    def _usable(self) -> None:
        if self._closed or self._socket() is None:
            raise SubscriptionClosed("the subscription's connection is closed")

    def _socket(self) -> Any:
        # redis-py keeps the socket on the connection; can_read would reconnect a closed one
        # (and lose the subscription in silence), so its presence is checked first.
        return getattr(self._connection, "_sock", None)


def _kind(reply: Any) -> bytes | None:
    """The pub/sub frame's type (``message``, ``subscribe`` …), or None for a plain reply."""
    if isinstance(reply, list) and reply and isinstance(reply[0], bytes):
        return reply[0]
    return None
