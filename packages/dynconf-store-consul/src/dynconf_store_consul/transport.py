"""The HTTP leg to a Consul agent: endpoint grammar, TLS, and one request → one typed reply.

py-consul's high-level calls turn every non-2xx answer into an exception whose message quotes
the response body, and fold every 5xx and 429 into one class; a store must decide retries on
the status code and must never quote a body. So every call here goes through py-consul's
HTTP client contract, carried on urllib3 (:mod:`dynconf_store_consul.http`, with the
blocking-query-aware timeouts: a request that carries ``index`` waits for ``wait`` plus its
jitter before timing out), which hands back the raw ``(code, headers, body)``; the status is
mapped in :mod:`dynconf_store_consul.source`.

Nothing in this module imports the client library at import time: :class:`Transport` is
only constructed by ``build``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from dynconf.errors import Origin, Refusal, RemoteError
from dynconf.store_http import BodyBound, HttpPolicy
from dynconf.stores import TlsSettings, redact_url

__all__ = [
    "DEFAULT_TIMEOUT",
    "ENTRY_ENVELOPE",
    "Endpoint",
    "Reply",
    "Transport",
    "answer_bound",
    "parse_endpoint",
]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds one request may take, excluding a blocking query's own wait."""
ENTRY_ENVELOPE: Final = 1024
"""Bytes a KV entry's fields other than ``Key`` and ``Value`` take in an answer, with room
to spare (``LockIndex``, ``Flags``, ``CreateIndex``, ``ModifyIndex``, ``Session``, the
brackets and a transaction's ``Results``/``KV`` wrapping and ``Index``)."""

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

log = logging.getLogger("dynconf.store.consul")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A Consul agent address: scheme, host and port (no path, no credentials)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint | Refusal:
    """The endpoint, or the refusal that names the fix (the URL redacted in it).

    The address must be ``http://`` or ``https://`` with a host; the port defaults to the
    scheme's (80/443). A path is refused because the client cannot prefix one, and
    userinfo is refused because Consul takes its token in a header, not in the URL.
    """
    shown = redact_url(text)
    if not text:
        return Refusal("endpoint", "consul needs {field} (or DYNAMIC_CONFIG_AGENT_ENDPOINT)",
                       "the agent's address, e.g. http://consul.infra.svc:8500")  # fmt: skip
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in _DEFAULT_PORTS:
        return Refusal("endpoint", f"the consul endpoint {shown} needs an http:// or https:// "
                       "scheme, e.g. http://consul.infra.svc:8500", words=True)  # fmt: skip
    if "@" in rest.split("/", 1)[0]:
        return Refusal("endpoint", f"the consul endpoint {shown} carries credentials",
                       "remove them from the URL and pass the ACL token as {field:token} "
                       "({field:auth=token})", words=True)  # fmt: skip
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return Refusal("endpoint", f"the consul endpoint {shown} does not parse as a URL",
                       "write scheme://host:port", words=True)  # fmt: skip
    if not parts.hostname:
        return Refusal("endpoint", f"the consul endpoint {shown} names no host",
                       "write scheme://host:port", words=True)  # fmt: skip
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return Refusal("endpoint", f"the consul endpoint {shown} has a path or query",
                       "the client speaks to the agent's root, so give only scheme://host:port",
                       words=True)  # fmt: skip
    scheme = scheme.lower()
    return Endpoint(scheme, parts.hostname, port or _DEFAULT_PORTS[scheme])


def answer_bound(ceiling: int, keys: Sequence[str]) -> BodyBound:
    """The most bytes a Consul answer may carry when each key's value is within ``ceiling``.

    Consul sends a KV value of N bytes base64-encoded inside a JSON entry:
    ``[{"Key": "<key>", "Value": "<base64>", ...}]``. Base64 spells every 3 bytes (the last
    group padded) as 4, so the value takes at most 4/3·N + 4 bytes, and needs no JSON
    escaping. The key is JSON-escaped by Go's encoder, at most 6 bytes per byte
    (``\\u003c`` for ``<``); the other fields fit in :data:`ENTRY_ENVELOPE`. So one entry is
    at most 4/3·N + 6·len(key) + ``ENTRY_ENVELOPE`` + 4 bytes, and a read of several keys (one
    transaction) at most the sum over its keys. The same bound holds every other answer the
    store reads (a login, a key listing), all far smaller.
    """
    envelope = ENTRY_ENVELOPE + 4 + 6 * max(len(key.encode("utf-8")) for key in keys)
    return BodyBound.for_documents(
        ceiling, expansion=Fraction(4, 3), envelope=envelope, documents=len(keys)
    )


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer: status, headers (case-insensitive mapping) and body text."""

    code: int
    headers: Mapping[str, str]
    body: str

    def header_int(self, name: str) -> int | None:
        value = self.headers.get(name)
        if value is None or not value.strip().isdigit():
            return None
        return int(value.strip())


def _verify_and_cert(tls: TlsSettings, describe: str) -> tuple[bool | str, tuple[str, str] | None]:
    """What the TLS layer needs for trust; trust files are checked here, at build, by path."""
    for label, path in (("--ca", tls.ca_file), ("--tls-cert", tls.cert_file),
                        ("--tls-key", tls.key_file)):  # fmt: skip
        if path and not Path(path).is_file():
            raise RemoteError(
                f"{label} {path} is not a readable file; mount it or fix the path",
                origin=Origin.remote(describe),
            )
    cert = (tls.cert_file, tls.key_file) if tls.cert_file and tls.key_file else None
    if tls.ca_file:
        return tls.ca_file, cert
    if tls.skip_verify:
        log.warning(
            "store_tls_skip_verify",
            extra={"store": describe},
        )
        return False, cert
    return True, cert


class Transport:
    """One HTTP client (py-consul's contract on urllib3) bound to an endpoint, TLS and timeout.

    Trust files are read by the TLS layer when connections are made; the agent rebuilds the
    source (and so this transport, with fresh connections) when they change.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        tls: TlsSettings,
        *,
        timeout: float,
        describe: str,
        policy: HttpPolicy | None = None,
        bound: BodyBound | None = None,
    ) -> None:
        """``bound``: the most bytes one answer may carry (:func:`answer_bound`); an answer
        past it raises the engine's :class:`~dynconf.errors.OversizeError` unread."""
        from dynconf_store_consul.http import Urllib3Client

        verify, cert = _verify_and_cert(tls, describe)
        self._describe = describe
        self._timeout = timeout
        # Every request names its token explicitly (py-consul's own client would let
        # CONSUL_HTTP_TOKEN override it); the token reaches this agent only: no environment
        # proxy, no redirect elsewhere, as HttpPolicy says.
        self._http = Urllib3Client(
            endpoint.host,
            endpoint.port,
            endpoint.scheme,
            verify,
            cert,
            timeout=timeout,
            policy=policy or HttpPolicy(),
            subject=describe,
            origin=Origin.remote(describe),
            server_name=tls.server_name or None,
            bound=bound,
        )

    def call(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]] = (),
        token: str | None = None,
        body: str | None = None,
    ) -> Reply:
        """Send one request; transport failures become :class:`RemoteError` (no text quoted)."""
        from urllib3 import exceptions

        headers = {"X-Consul-Token": token} if token else {}
        try:
            answer = self._http.send(method, path, list(params), headers, body)
        except exceptions.SSLError:
            raise self._failed(
                "refused the TLS handshake; check --ca (the CA that signed the agent's "
                "certificate), --tls-server-name and the client certificate"
            ) from None
        except exceptions.NewConnectionError:  # before TimeoutError: it is one, in urllib3
            raise self._failed(
                "cannot be reached; check the endpoint and that the agent runs"
            ) from None
        except exceptions.TimeoutError:
            raise self._failed(
                f"did not answer within the {self._timeout:g} s request timeout; check the "
                "agent is up, or raise --timeout"
            ) from None
        except (exceptions.ProtocolError, exceptions.ProxyError):
            raise self._failed(
                "cannot be reached; check the endpoint and that the agent runs"
            ) from None
        except exceptions.HTTPError as exc:
            raise self._failed(f"request failed ({type(exc).__name__})") from None
        except OSError as exc:  # a CA or key file that vanished or is not PEM
            raise self._failed(
                f"could not set up TLS ({type(exc).__name__}); check the --ca, --tls-cert "
                "and --tls-key files are PEM"
            ) from None
        return Reply(int(answer.code), answer.headers, str(answer.body))

    def _failed(self, what: str) -> RemoteError:
        return RemoteError(f"{self._describe} {what}", origin=Origin.remote(self._describe))

    def close(self) -> None:
        self._http.close()
