"""The Redis source: one string key, read with GET, watched through keyspace notifications.

Blocking (redis-py's synchronous client); the agent runs it in a worker thread. The watch
subscribes to ``__keyspace@<db>__:<key>`` on a connection of its own and re-reads the key on
every notification, so a delete or an expiry answers ABSENT and a write its new text. Under
RESP3 (Redis 6 and later) that one connection also answers every read while the watch is up,
so a followed key holds one connection, not two (:mod:`dynconf_store_redis.subscription`).

Redis counts no revision for a key, so ``Fetched.revision`` is ``None``: inventing a marker
(a hash, a local counter) would make dashboards compare numbers that mean nothing across
pods. Consecutive identical answers are not yielded (a rewrite of the same bytes, or an
``EXPIRE`` that leaves the value, is not a change).

redis-py's own retries are turned off: a retry that reconnects and resubscribes in silence
would lose the changes made while the connection was down. The watch reconnects itself,
with :class:`~dynconf.stores.Pace` backoff, reports each failure, and resyncs after every
reconnection by reading the key and yielding it when it moved.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from dynconf.errors import AuthError, DynconfError, Origin, OversizeError, RemoteError
from dynconf.render import DEFAULT_MAX_DOCUMENT_BYTES, check_byte_count
from dynconf.sources import SourceSupport
from dynconf.stores import (
    ABSENT,
    Absent,
    Fetched,
    Pace,
    TlsSettings,
    same_document,
)
from dynconf_store_redis.address import RedisAddress
from dynconf_store_redis.plugin import RedisStoreType
from dynconf_store_redis.subscription import Subscription, SubscriptionClosed

if TYPE_CHECKING:
    import redis

__all__ = ["DEFAULT_TIMEOUT", "NotificationsDisabledError", "RedisSource"]

log = logging.getLogger("dynconf.store.redis")

DEFAULT_TIMEOUT: Final = 10.0
STOP_SLICE: Final = 0.25
"""How long one wait for a notification lasts before the stop flag is checked, in seconds."""
RECONNECT_BASE: Final = 0.5
RECONNECT_CEILING: Final = 30.0


class NotificationsDisabledError(RemoteError):
    """The server publishes no keyspace notifications for string writes and deletes."""


class RedisSource(SourceSupport):
    """Reads and watches one Redis string key holding a whole document."""

    reports_watching = True

    capability = RedisStoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "redis watch failure"
    failure_store = "redis"

    def __init__(
        self,
        address: RedisAddress,
        key: str,
        format_name: str,
        *,
        described: str,
        tls: TlsSettings | None = None,
        timeout: float | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self._address = address
        self._key = key
        self._format = format_name
        self.description = described
        self._tls = tls or TlsSettings()
        self._timeout = timeout or DEFAULT_TIMEOUT
        self._max_bytes = max_bytes or DEFAULT_MAX_DOCUMENT_BYTES
        self._sizing = True
        """Whether ``STRLEN`` is asked before ``GET`` (until the ACL user is refused it)."""
        self._client_instance: redis.Redis | None = None
        self._lock = threading.Lock()
        self._live: Subscription | None = None
        """The watch's subscription while it is up and can read (RESP3); reads go through it."""

    @property
    def channel(self) -> str:
        """The keyspace channel the watch subscribes to."""
        return f"__keyspace@{self._address.db}__:{self._key}"

    # -- protocol ---------------------------------------------------------------------

    @property
    def error_subject(self) -> str:
        """redis errors name the key; the endpoint is in the origin (the description)."""
        return f"redis key {self._key}"

    @property
    def auth_subject(self) -> str:
        """A refusal says it was redis that refused, not the agent."""
        return f"redis key {self._key}: redis"

    def fetch(self) -> Fetched | Absent:
        try:
            value = self._read()
        except DynconfError:
            raise  # the size refusal: the connection is fine
        except Exception as exc:
            self._drop_client()
            raise self._translate(exc) from None
        if value is None:
            return ABSENT
        if not isinstance(value, bytes):
            raise self.remote_error("answered GET with something other than a string")
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            raise self.remote_error(
                "holds a value that is not UTF-8 text; store the document as UTF-8"
            ) from None
        return Fetched(text=text, format=self._format)

    def _read(self) -> Any:
        """GET the key: on the watch's connection while it is up, else on the client's pool."""
        live = self._live
        if live is not None:
            with contextlib.suppress(SubscriptionClosed):
                return self._sized_get(live.command)
        value = self._sized_get(self._client().execute_command)
        if self._live is not None:  # the watch came up meanwhile: this connection is spare
            self._release_pool()
        return value

    def _sized_get(self, command: Callable[..., Any]) -> Any:
        """``STRLEN``, then ``GET`` only if the value is within the ceiling.

        redis-py holds a value several times over while reading it (about 3x: 52 MiB for a
        17 MiB value), so a value past the ceiling, read whole to be measured, could cost a
        64Mi agent its memory limit before the engine's size check refuses it. The length
        comes first instead. An ACL user refused ``STRLEN`` (the documented grants are
        ``+get +subscribe``) is read as before, and told once how to bound it.
        """
        import redis as redis_module

        if self._sizing:
            try:
                size = command("STRLEN", self._key)
            except redis_module.exceptions.NoPermissionError:
                self._sizing = False
                log.warning(
                    "store_size_unchecked",
                    extra={
                        "store": "redis",
                        "source": self.description,
                        "detail": "the ACL user may not STRLEN, so a value past the "
                        "document ceiling is read whole before it is refused; grant +strlen",
                    },
                )
            else:
                check_byte_count(int(size), self._max_bytes)
        return command("GET", self._key)

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield the key's document after each keyspace notification (ABSENT once gone).

        The first read primes and yields nothing. A dropped subscription is reported and
        re-opened with backoff; after it is back the key is read again and yielded when it
        moved, so a change made while the server was away is not lost. Notifications turned
        off on the server raise :class:`NotificationsDisabledError` (the fix is on the
        server; the agent's resync keeps the document fresh meanwhile).
        """
        pace = Pace(interval=RECONNECT_BASE, ceiling=max(RECONNECT_CEILING, interval))
        last: Fetched | Absent | None = None
        while not stop():
            subscription: Subscription | None = None
            try:
                subscription = self._subscribe()
                if subscription.reads:
                    self._live = subscription
                    self._release_pool()
                answer = self._watched_fetch()
                pace.succeeded()
                if answer is not None:
                    if last is not None and _moved(last, answer):
                        yield answer
                    last = answer
                if self.on_watching is not None:
                    self.on_watching()
                while not stop():
                    if not self._notified(subscription):
                        continue
                    answer = self._watched_fetch()
                    if answer is not None and (last is None or _moved(last, answer)):
                        last = answer
                        yield answer
                return
            except (AuthError, NotificationsDisabledError) as error:
                self.report(error)
                raise
            except RemoteError as error:
                self.report(error)
                pace.failed()
                self.pause(pace.next_wait(), stop)
            finally:
                if subscription is not None:
                    if self._live is subscription:
                        self._live = None
                    subscription.close()

    def _watched_fetch(self) -> Fetched | Absent | None:
        """The watch's read; None for a value past the ceiling. The subscription is fine and
        stays: the resyncs report the refusal, and the next write within the ceiling is
        delivered at once."""
        try:
            return self.fetch()
        except OversizeError:
            return None

    def close(self) -> None:
        self._drop_client()

    # -- the subscription ---------------------------------------------------------------

    def _subscribe(self) -> Subscription:
        """A confirmed subscription to the key's channel, on a connection of its own."""
        import redis as redis_module

        def refused_hello(exc: BaseException) -> bool:
            # A server before Redis 6, or a proxy, that does not know or allow HELLO 3.
            return isinstance(exc, redis_module.exceptions.ResponseError) and (
                "HELLO" in str(exc).upper() or "unknown command" in str(exc).lower()
            )

        try:
            return Subscription.open(
                self._connect,
                self.channel,
                timeout=self._timeout,
                refused_hello=refused_hello,
                before=self._check_notifications,
            )
        except DynconfError:
            raise
        except Exception as exc:
            self._drop_client()
            raise self._translate(exc, subscribing=True) from None

    def _notified(self, subscription: Subscription) -> bool:
        """Wait one slice for a notification; raise when the subscription is dead."""
        try:
            return subscription.wait(STOP_SLICE)
        except Exception as exc:
            self._drop_client()
            error = self._translate(exc)
            if isinstance(error, AuthError):
                raise error from None
            raise self.remote_error(
                f"lost its subscription ({type(exc).__name__}); re-subscribing"
            ) from None

    def _check_notifications(self, subscription: Subscription) -> None:
        """Refuse to watch silently when the server publishes nothing for the key.

        Needs ``CONFIG GET``; when the server or the ACL user forbids it, the check is
        skipped with a warning and the subscription is trusted (the resync still runs).
        """
        import redis as redis_module

        try:
            answer = subscription.config_get("notify-keyspace-events")
        except (redis_module.exceptions.ResponseError, redis_module.exceptions.AuthorizationError):
            log.warning(
                "redis_notifications_unverified",
                extra={
                    "detail": "CONFIG GET is not allowed, so keyspace notifications could not "
                    "be checked; make sure notify-keyspace-events includes K$g",
                    "store": "redis",
                    "source": self.description,
                },
            )
            return
        flags = answer or ""
        every = "A" in flags
        if "K" in flags and (every or "$" in flags) and (every or "g" in flags):
            return
        raise NotificationsDisabledError(
            f"redis key {self._key} cannot be watched: the server has keyspace notifications "
            f"off (notify-keyspace-events is {flags!r}); run CONFIG SET notify-keyspace-events "
            "K$gx (or KEA) and put it in redis.conf so a restart keeps it",
            origin=Origin.remote(self.description),
        )

    # -- the client ---------------------------------------------------------------------

    def _client(self) -> redis.Redis:
        with self._lock:
            if self._client_instance is None:
                self._client_instance = self._build_client()
            return self._client_instance

    def _build_client(self) -> redis.Redis:
        """A fresh client; the trust files are read by each new connection's handshake."""
        import redis as redis_module

        return redis_module.Redis(ssl=self._address.tls, **self._connection_options())

    def _connect(self, protocol: int) -> Any:
        """A connected connection of the watch's own, speaking RESP ``protocol``."""
        from redis.connection import Connection, SSLConnection

        kind = SSLConnection if self._address.tls else Connection
        connection: Any = kind(protocol=protocol, **self._connection_options())
        try:
            connection.connect()
        except BaseException:
            with contextlib.suppress(Exception):  # a half-open connection may refuse to close
                connection.disconnect()
            raise
        return connection

    def _connection_options(self) -> dict[str, Any]:
        """What every connection to the server is opened with: the client's and the watch's."""
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        address = self._address
        password = address.password
        if address.username and password is None:
            password = ""  # a lone name is an ACL user without a password (nopass)
        options: dict[str, Any] = {
            "host": address.host,
            "port": address.port,
            "db": address.db,
            "username": address.username,
            "password": password,
            "socket_timeout": self._timeout,
            "socket_connect_timeout": self._timeout,
            "retry": Retry(NoBackoff(), 0),
            "health_check_interval": 0,
        }
        if address.tls:
            options.update(
                ssl_cert_reqs="required",
                ssl_check_hostname=True,
                ssl_ca_certs=self._tls.ca_file,
                ssl_certfile=self._tls.cert_file,
                ssl_keyfile=self._tls.key_file,
            )
        return options

    def _release_pool(self) -> None:
        """Close the client's idle connections: while the watch reads, they would sit unused."""
        with self._lock:
            client = self._client_instance
        if client is not None:
            with contextlib.suppress(Exception):
                client.connection_pool.disconnect(inuse_connections=False)

    def _drop_client(self) -> None:
        """Forget the client so the next call connects afresh (and re-reads trust files)."""
        with self._lock:
            client, self._client_instance = self._client_instance, None
        if client is not None:
            _close_quietly(client)

    # -- errors -------------------------------------------------------------------------

    def _translate(self, exc: BaseException, *, subscribing: bool = False) -> DynconfError:
        """Decide on redis-py's typed exceptions (they carry the server's error codes)."""
        import redis as redis_module

        errors = redis_module.exceptions
        if isinstance(exc, DynconfError):
            return exc
        if isinstance(exc, errors.NoPermissionError):
            if subscribing:
                return self.auth_error(
                    f"may not subscribe to {self.channel}; grant the ACL user +subscribe "
                    f"and &{self.channel} (or &__keyspace@{self._address.db}__:*)"
                )
            return self.auth_error(f"may not read the key; grant the ACL user ~{self._key}")
        if isinstance(exc, (errors.AuthenticationError, errors.AuthorizationError)):
            return self.auth_error(
                "refused the URL's credentials; check the user and password in the URL"
            )
        if isinstance(exc, errors.TimeoutError):
            return self.remote_error(f"did not answer within {self._timeout:g} s")
        if isinstance(exc, errors.ConnectionError):
            return self.remote_error(
                f"could not be reached ({self._scrub(str(exc))}); check the URL, --ca and "
                "--tls-cert/--tls-key"
            )
        if isinstance(exc, errors.ResponseError):
            code = str(exc).split(" ", 1)[0] if str(exc) else "ERR"
            return self.remote_error(f"answered with the error code {code}")
        return self.remote_error(f"failed ({type(exc).__name__})")

    def _scrub(self, text: str) -> str:
        """Library text with the password removed, in case a message ever echoes it."""
        secret = self._address.password
        return text.replace(secret, "…") if secret else text


def _moved(last: Fetched | Absent, answer: Fetched | Absent) -> bool:
    return not same_document(last, answer)


def _close_quietly(closable: Any) -> None:
    with contextlib.suppress(Exception):  # a dead connection may refuse to close
        closable.close()
