"""py-consul's HTTP client contract, carried by urllib3 instead of requests.

py-consul lets its HTTP client be replaced (``consul.base.HTTPClient``: ``get``/``put``/
``post``/``delete`` hand a ``Response(code, headers, body)`` to a callback). Its own client is
built on requests, whose per-answer work (a ``Response`` object, cookie extraction, hooks,
encoding guesses) costs about as much CPU again as urllib3's parse of the same answer. A watch
reads one answer per change and one per blocking-query renewal, so that cost sits on every
change's path to the file and on every idle renewal. urllib3 is what requests itself sends
with, so the wire behaviour is unchanged.

The store's HTTP policy (:mod:`dynconf.store_http`) is applied here in urllib3's terms:

* no environment proxy unless ``use_proxy`` (urllib3 never reads the environment itself);
* a redirect is never followed by urllib3: every 3xx with a ``Location`` goes through
  :func:`~dynconf.store_http.follow_or_refuse`, so the token reaches another address only
  when the policy allows it, and never another origin.

Every answer is read through the store's :class:`~dynconf.store_http.BodyBound` (when it
has one): a ``Content-Length`` past it is refused before the body is read, a chunked body is
read :data:`~dynconf.store_http.BODY_CHUNK` at a time and refused as soon as it passes it,
and a refused answer's connection is closed, never pooled half-read.

Closing the client also ends the requests in flight: a blocking query waits up to its
``wait`` (minutes) for an answer, and urllib3 closes only idle connections, so every
connection this client opened is remembered (weakly) and its socket shut down on close. The
thread blocked on it then sees the connection end at once instead of outliving its source.

This module imports py-consul and urllib3; :mod:`dynconf_store_consul.transport` imports it
when a source is built, not when the plugin is discovered.
"""

from __future__ import annotations

import contextlib
import socket
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import urllib3
from consul import base
from consul.std import DEFAULT_WAIT, parse_duration
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

from dynconf.errors import Origin
from dynconf.store_http import (
    BODY_CHUNK,
    BodyBound,
    HttpPolicy,
    follow_or_refuse,
    note_ignored_proxy,
)

__all__ = ["MAX_REDIRECTS", "Urllib3Client"]

MAX_REDIRECTS: Final = 10
"""Hops followed within the endpoint's origin (requests' default is 30; a loop ends sooner)."""
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_POOL_SIZE: Final = 10
"""Connections kept per client: the watch's blocking query and the occasional other call."""


class Urllib3Client(base.HTTPClient):  # type: ignore[misc]
    """One endpoint's connections, its TLS and its timeouts; the policy decides every hop."""

    def __init__(
        self,
        host: str,
        port: int,
        scheme: str,
        verify: bool | str,
        cert: tuple[str, str] | None,
        *,
        timeout: float,
        policy: HttpPolicy,
        subject: str,
        origin: Origin,
        server_name: str | None = None,
        bound: BodyBound | None = None,
    ) -> None:
        super().__init__(host, port, scheme, verify, cert)
        self.bound = bound
        self.timeout = timeout
        self.policy = policy
        self.subject = subject
        self.origin = origin
        tls: dict[str, Any] = {}
        if scheme == "https":
            tls = _tls_options(verify, cert, server_name)
        proxy = _proxy_for(self.base_uri) if policy.use_proxy else None
        if not policy.use_proxy:
            note_ignored_proxy(subject)
        manager: _Remembering = (
            _Proxied(proxy, num_pools=1, maxsize=_POOL_SIZE, **tls)
            if proxy
            else _Direct(num_pools=1, maxsize=_POOL_SIZE, **tls)
        )
        self.connections = manager.connections = _Connections()
        self.manager = manager

    def read_timeout(self, params: list[tuple[str, Any]] | None) -> float:
        """The request timeout, plus a blocking query's wait and Consul's wait/16 jitter."""
        named = dict(params or ())
        if "index" not in named:
            return self.timeout
        wait = parse_duration(named["wait"]) if "wait" in named else DEFAULT_WAIT
        return float(self.timeout + wait + wait / 16)

    def send(
        self,
        method: str,
        path: str,
        params: list[tuple[str, Any]] | None,
        headers: Mapping[str, str] | None,
        body: str | bytes | None,
    ) -> base.Response:
        """One request, its redirects decided by the policy; the answer as py-consul's tuple."""
        url = self.uri(path, params)
        timeout = urllib3.Timeout(connect=self.timeout, read=self.read_timeout(params))
        for _ in range(MAX_REDIRECTS + 1):
            answer = self.manager.urlopen(
                method,
                url,
                body=body or None,
                headers=dict(headers or {}),
                redirect=False,
                retries=False,
                timeout=timeout,
                preload_content=False,
            )
            data = self.body(answer)
            location = answer.headers.get("Location")
            if answer.status not in _REDIRECTS or not location:
                text = data.decode("utf-8", "replace")
                return base.Response(answer.status, answer.headers, text)
            url = follow_or_refuse(
                self.policy,
                answer.status,
                location,
                here=url,
                subject=self.subject,
                origin=self.origin,
            )
            if answer.status == 303 or (answer.status in (301, 302) and method == "POST"):
                method, body = "GET", None  # what a browser, and requests, do
        return base.Response(599, {}, "")  # pragma: no cover - loop guard, see MAX_REDIRECTS

    def body(self, answer: urllib3.BaseHTTPResponse) -> bytes:
        """The answer's body, read within :attr:`bound`; the connection goes back to the
        pool only when the body was read to its end."""
        try:
            if self.bound is None:
                return answer.read()
            self.bound.check_length(answer.headers.get("Content-Length"))
            return self.bound.read(answer.stream(BODY_CHUNK))
        except BaseException:
            answer.close()  # refused or broken half-way: drop the connection
            raise
        finally:
            answer.release_conn()

    def get(
        self,
        callback: Callable[[base.Response], Any],
        path: str,
        params: list[tuple[str, Any]] | None = None,
        headers: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        return callback(self.send("GET", path, params, headers, None))

    def put(
        self,
        callback: Callable[[base.Response], Any],
        path: str,
        params: list[tuple[str, Any]] | None = None,
        data: str | bytes = "",
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        return callback(self.send("PUT", path, params, headers, data))

    def delete(
        self,
        callback: Callable[[base.Response], Any],
        path: str,
        params: list[tuple[str, Any]] | None = None,
        data: str | bytes = "",
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        return callback(self.send("DELETE", path, params, headers, data))

    def post(
        self,
        callback: Callable[[base.Response], Any],
        path: str,
        params: list[tuple[str, Any]] | None = None,
        data: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        return callback(self.send("POST", path, params, headers, data))

    def close(self) -> None:
        """Release the pool and end every request still waiting on an answer."""
        self.connections.end_all()
        self.manager.clear()


class _Connections:
    """Every connection a client opened (weakly held), and whether the client is closed.

    A connection opened after :meth:`end_all` (a request that raced the close) is ended as
    soon as it connects, so no request outlives its client by a blocking wait.
    """

    def __init__(self) -> None:
        self.live: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self.ended = False

    def opened(self, connection: HTTPConnection) -> None:
        self.live.add(connection)
        if self.ended:
            _shut(connection)

    def end_all(self) -> None:
        self.ended = True
        for connection in list(self.live):
            _shut(connection)


def _shut(connection: HTTPConnection) -> None:
    """Shut the socket down both ways: a thread blocked reading it sees the end at once."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed, by the peer or urllib3
            sock.shutdown(socket.SHUT_RDWR)


class _Remembering(urllib3.PoolManager):
    """A pool manager whose pools remember every connection they open (in ``connections``),
    so :meth:`Urllib3Client.close` can reach the ones that are in use."""

    connections: _Connections

    def _new_pool(
        self,
        scheme: str,
        host: str,
        port: int,
        request_context: dict[str, Any] | None = None,
    ) -> HTTPConnectionPool:
        pool = super()._new_pool(scheme, host, port, request_context)
        pool.ConnectionCls = _remembered(pool.ConnectionCls, self.connections)  # type: ignore[arg-type]
        return pool


class _Direct(_Remembering):
    """Straight to the endpoint."""


class _Proxied(_Remembering, urllib3.ProxyManager):
    """Through the proxy the environment names (only when the policy allows one)."""


def _remembered(
    base_class: type[HTTPConnection], connections: _Connections
) -> type[HTTPConnection]:
    """``base_class`` whose every connect is told to ``connections``."""

    class Remembered(base_class):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            connections.opened(self)

    return Remembered


def _tls_options(
    verify: bool | str, cert: tuple[str, str] | None, server_name: str | None
) -> dict[str, Any]:
    """urllib3's pool options for the store's trust: the same defaults requests applies."""
    options: dict[str, Any] = {}
    if verify is False:
        options["cert_reqs"] = "CERT_NONE"
        options["assert_hostname"] = False
    else:
        options["cert_reqs"] = "CERT_REQUIRED"
        if isinstance(verify, str):
            options["ca_certs"] = verify
        else:
            import certifi

            options["ca_certs"] = certifi.where()  # requests' default bundle, as before
    if cert is not None:
        options["cert_file"], options["key_file"] = cert
    if server_name:
        options["server_hostname"] = server_name
        options["assert_hostname"] = server_name
    return options


def _proxy_for(endpoint: str) -> str | None:
    """The environment's proxy for ``endpoint`` as requests reads it (``NO_PROXY`` honoured)."""
    import requests.utils  # py-consul's dependency: its reading of the variables, unchanged

    proxies = requests.utils.get_environ_proxies(endpoint)
    scheme = urlsplit(endpoint).scheme.lower()
    found = proxies.get(scheme) or proxies.get("all")
    return str(found) if found else None
