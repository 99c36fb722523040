"""The NATS leg: connect settings, TLS, the private event loop, and typed failures.

nats-py binds a client to the event loop it connected on: its reader, pinger and flusher
are tasks of that loop. The engine awaits a source from more than one loop (the watch runs
in one ``anyio.run``, each resync in another, a caller's ``refresh_remote_async`` in its
own), and a loop that ends takes the client's tasks with it. So the client lives on a
:class:`HomeLoop` — one asyncio loop on a daemon thread, owned by the source — and every
public coroutine of the source hands its work there and awaits the answer from wherever it
was called. Cancelling the caller cancels the work on the home loop.

Reconnecting is the source's job, not the client's: the client is created with
``allow_reconnect=False`` so a lost server closes it, and the next read (or the watch)
connects again with the source's backoff. That way a ``.creds`` file and the TLS files are
read again at every connect, and the watch knows exactly when its stream died.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import ssl
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from dynconf.errors import AuthError, DynconfError, Origin, RemoteError
from dynconf.stores import Credential, TlsSettings, read_credential

if TYPE_CHECKING:
    from nats.aio.client import Client

__all__ = [
    "AUTH_PROTOCOL_ERRORS",
    "DEFAULT_TIMEOUT",
    "ConnectSettings",
    "HomeLoop",
    "classify",
    "connect",
    "load_client",
    "tls_context",
]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds for one connect or one read."""
PING_INTERVAL: Final = 20
"""Seconds between client pings; with 3 outstanding, a dead peer is noticed within ~80 s."""

AUTH_PROTOCOL_ERRORS: Final = frozenset(
    {
        "authorization violation",
        "authentication timeout",
        "user authentication expired",
        "user authentication revoked",
        "account authentication expired",
    }
)
"""The server's ``-ERR`` codes that mean "this credential is refused".

nats-py types an authorization failure only after the handshake (``AuthorizationError``);
during the handshake it raises a plain error carrying the server's ``-ERR`` line. The
protocol's error strings are the server's status codes, so the code is compared whole
(after stripping the client's ``nats:`` prefix and the quotes), never searched for.
"""

log = logging.getLogger("dynconf.store.nats")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ConnectSettings:
    """Everything needed to open one client; ``repr`` never shows the token."""

    servers: tuple[str, ...]
    description: str
    token: Credential | None = field(default=None, repr=False)
    creds_file: str | None = None
    tls: TlsSettings = field(default_factory=TlsSettings)
    timeout: float = DEFAULT_TIMEOUT


class HomeLoop:
    """A private asyncio loop on a daemon thread, started at first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._serve, args=(loop,), name=self._name, daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``work`` on the home loop; the future is usable from any thread."""
        return asyncio.run_coroutine_threadsafe(work, self.loop())

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the home loop and await its result from the caller's loop."""
        return await asyncio.wrap_future(self.submit(work))

    @property
    def running(self) -> bool:
        return self._loop is not None and not self._loop.is_closed()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop (pending work is cancelled with it) and join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout)


def load_client() -> None:
    """Import nats-py without its websocket transport.

    nats-py imports aiohttp, when it is installed, for ``ws://`` servers — which this store
    refuses (``nats://`` and ``tls://`` only). In an agent image aiohttp is there anyway
    (the Kubernetes client needs it), and importing it costs ~12 MiB of RSS. The import is
    hidden from nats-py only while nats-py loads; later importers of aiohttp get it as usual.
    """
    if "nats.aio.transport" in sys.modules or "aiohttp" in sys.modules:
        import nats

        return
    sys.modules["aiohttp"] = None  # type: ignore[assignment]
    try:
        import nats
        import nats.js.kv  # noqa: F401
    finally:
        if sys.modules.get("aiohttp", "") is None:
            del sys.modules["aiohttp"]


def tls_context(tls: TlsSettings, description: str) -> ssl.SSLContext | None:
    """The client's TLS context, the files read now (at connect); None without TLS material.

    A private CA replaces the platform roots; a client certificate needs its key (refused
    alone at validation). Failures name the file, never its contents.
    """
    if not (tls.ca_file or tls.cert_file or tls.key_file or tls.skip_verify):
        return None
    for label, path in (("--ca", tls.ca_file), ("--tls-cert", tls.cert_file),
                        ("--tls-key", tls.key_file)):  # fmt: skip
        if path and not Path(path).is_file():
            raise RemoteError(
                f"{description}: {label} {path} is not a readable file; mount it or fix the path",
                origin=Origin.remote(description),
            )
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
        if tls.cert_file and tls.key_file:
            context.load_cert_chain(tls.cert_file, tls.key_file)
    except (ssl.SSLError, OSError, ValueError):
        raise RemoteError(
            f"{description}: the TLS files (--ca, --tls-cert, --tls-key) are not PEM "
            "material of the kind expected (a CA bundle, a certificate, its private key)",
            origin=Origin.remote(description),
        ) from None
    if tls.skip_verify:
        log.warning(
            "store_tls_skip_verify",
            extra={"store": description},
        )
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def protocol_error(error: BaseException) -> str | None:
    """The server's ``-ERR`` code inside a plain nats-py error, lower-cased, or None."""
    import nats.errors

    if type(error) is not nats.errors.Error or not error.args:
        return None
    text = str(error.args[0]).strip()
    if text.startswith("nats:"):
        text = text[len("nats:") :].strip()
    return text.strip("'\"").strip().lower() or None


def classify(error: BaseException, description: str, doing: str) -> DynconfError:
    """A nats-py or transport failure as ``auth`` (the server refused the credential) or
    ``remote`` (everything else); the sentence never quotes the library's text."""
    import nats.errors

    origin = Origin.remote(description)
    if isinstance(error, DynconfError):
        return error
    if isinstance(error, nats.errors.AuthorizationError) or (
        protocol_error(error) in AUTH_PROTOCOL_ERRORS
    ):
        return AuthError(
            f"{description} refused the credential while {doing} (authorization violation); "
            "check the token or the .creds file and the user's permissions",
            origin=origin,
        )
    if isinstance(error, nats.errors.InvalidUserCredentialsError):
        return AuthError(
            f"{description}: the .creds file does not hold a user JWT and an nkey seed; "
            "write it with `nsc generate creds`",
            origin=origin,
        )
    tls_failures = (
        ssl.SSLError,
        nats.errors.SecureConnFailedError,
        nats.errors.SecureConnRequiredError,
    )
    if isinstance(error, tls_failures):
        return RemoteError(
            f"{description} refused the TLS handshake while {doing}; check --ca (the CA "
            "that signed the server's certificate), --tls-server-name and the client "
            "certificate",
            origin=origin,
        )
    if isinstance(error, TimeoutError | asyncio.TimeoutError | nats.errors.TimeoutError):
        return RemoteError(
            f"{description} did not answer within the timeout while {doing}; check the "
            "server is up, or raise --timeout",
            origin=origin,
        )
    if isinstance(
        error,
        OSError
        | nats.errors.NoServersError
        | nats.errors.ConnectionClosedError
        | nats.errors.StaleConnectionError,
    ):
        return RemoteError(
            f"{description} cannot be reached while {doing}; check the endpoint and that "
            "the server runs",
            origin=origin,
        )
    return RemoteError(
        f"{description} failed while {doing} ({type(error).__name__}); retrying",
        origin=origin,
    )


async def connect(
    settings: ConnectSettings, on_closed: Callable[[], Awaitable[None]] | None = None
) -> Client:
    """One connected client (on the running loop), or a typed failure.

    ``allow_reconnect=False`` with ``max_reconnect_attempts=1``: nats-py's server selection
    would otherwise loop forever on a refused connection, and reconnecting belongs to the
    source. Each server is tried twice, 0.2 s apart.
    """
    import nats

    context = tls_context(settings.tls, settings.description)

    async def quiet(error: Exception) -> None:
        # nats-py logs every error with a traceback by default; the source reports its own.
        log.debug("store_client_error", extra={
                                              "store": settings.description,
                                              "error": type(error).__name__})  # fmt: skip

    async def closed() -> None:
        if on_closed is not None:
            await on_closed()

    options: dict[str, Any] = {
        "servers": list(settings.servers),
        "name": "dynconf",
        "connect_timeout": max(1, round(settings.timeout)),
        "allow_reconnect": False,
        "max_reconnect_attempts": 1,
        "reconnect_time_wait": 0.2,
        "ping_interval": PING_INTERVAL,
        "max_outstanding_pings": 3,
        "error_cb": quiet,
        "closed_cb": closed,
    }
    if settings.token:
        options["token"] = read_credential(settings.token)
    if settings.creds_file:
        if not Path(settings.creds_file).is_file():
            raise RemoteError(
                f"{settings.description}: --auth-token-path {settings.creds_file} is not a "
                "readable .creds file; mount it or fix the path",
                origin=Origin.remote(settings.description),
            )
        options["user_credentials"] = settings.creds_file
    if context is not None:
        options["tls"] = context
        if settings.tls.server_name:
            options["tls_hostname"] = settings.tls.server_name
    try:
        client = await asyncio.wait_for(
            nats.connect(**options), timeout=settings.timeout * 2 * len(settings.servers) + 1
        )
    except Exception as exc:
        raise classify(exc, settings.description, "connecting") from None
    if context is not None and not client._server_info.get("tls_required"):
        # nats-py upgrades to TLS only when the server asks for it; TLS material that
        # would silently go unused is refused instead.
        await client.close()
        raise RemoteError(
            f"{settings.description} does not require TLS, so the connection would not use "
            "--ca/--tls-cert; enable TLS on the server or remove the TLS settings",
            origin=Origin.remote(settings.description),
        )
    return client
