"""The HTTP leg: an hvac adapter over a requests session, answering typed status codes.

hvac's own helpers raise one exception class per status and keep the response body on the
exception; this store decides retries on the status code alone and never quotes a body, so
it asks the adapter not to raise and reads ``status_code`` itself. Every answer is read
within the store's :class:`~dynconf.store_http.BodyBound` (:func:`answer_bound`): one past
it is refused with the engine's :class:`~dynconf.errors.OversizeError` before it is held
whole. Everything here is imported only when a vault source is built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import requests
from hvac.adapters import RawAdapter
from requests.adapters import HTTPAdapter

from dynconf.errors import Origin, RemoteError
from dynconf.store_http import BodyBound, HttpPolicy, retry_after, store_session
from dynconf.stores import TlsSettings

__all__ = ["ANSWER_ENVELOPE", "Answer", "Transport", "answer_bound"]

ANSWER_ENVELOPE: Final = 256 * 1024
"""Bytes a Vault answer may spend around the secret's fields: ``request_id``, ``lease_*``,
``warnings``, ``auth`` and the version's ``metadata``, whose ``custom_metadata`` alone may
hold 64 pairs of a 128-byte key and a 512-byte value (each escaped at most 6 bytes per byte:
240 KiB)."""


def answer_bound(ceiling: int) -> BodyBound:
    """The most bytes a Vault answer may carry when the document it renders is within
    ``ceiling``.

    The document is the secret's fields as JSON (Python's encoder, UTF-8 kept as is); Vault
    sends the same fields as JSON from Go's encoder, which writes each character at most 6
    bytes long for each byte the document spends on it: ``<``, ``>`` and ``&`` as ``\\u003c``
    (1 byte → 6), a control character as ``\\u00XX`` (where the document spends at least 1),
    U+2028 / U+2029 as ``\\u2028`` (3 → 6); everything else no longer than the document's
    spelling. So the answer is at most 6·N bytes plus :data:`ANSWER_ENVELOPE`. The same bound
    holds every other answer (a login, a metadata read, a lease renewal), all far smaller.
    """
    return BodyBound.for_documents(ceiling, expansion=Fraction(6), envelope=ANSWER_ENVELOPE)


@dataclass(frozen=True, slots=True)
class Answer:
    """One Vault response: the status code and the JSON body (``{}`` when there is none)."""

    status: int
    body: Mapping[str, Any]
    retry_after: float | None = None
    """Seconds a 429 / 503 asked for (``Retry-After``), when it named any."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _ServerNameAdapter(HTTPAdapter):
    """Verify (and send SNI for) a fixed name instead of the URL's host.

    For a Vault reached by IP or through a tunnel whose certificate names the service.
    """

    def __init__(self, server_name: str) -> None:
        self._server_name = server_name
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["server_hostname"] = self._server_name
        kwargs["assert_hostname"] = self._server_name
        super().init_poolmanager(*args, **kwargs)


class Transport:
    """Sends requests to one Vault address with the source's TLS, namespace and timeout.

    Trust files are read by requests when a connection is made; a rebuilt source (the agent
    rebuilds on a trust-file change) starts from a fresh session and so re-reads them.
    """

    def __init__(
        self,
        address: str,
        *,
        tls: TlsSettings,
        namespace: str | None,
        timeout: float,
        origin: Origin,
        policy: HttpPolicy | None = None,
        bound: BodyBound | None = None,
    ) -> None:
        """``bound``: the most bytes one answer may carry (:func:`answer_bound`); an answer
        past it raises :class:`~dynconf.errors.OversizeError` from :meth:`call`, unread."""
        self.address = address.rstrip("/")
        self.timeout = timeout
        self._origin = origin
        # X-Vault-Token reaches this address only: no environment proxy, no redirect to
        # another origin (hvac asks requests to follow them).
        session = store_session(
            policy or HttpPolicy(),
            endpoint=self.address,
            subject=f"vault {self.address}",
            origin=origin,
            bound=bound,
        )
        if tls.server_name:
            session.mount("https://", _ServerNameAdapter(tls.server_name))
        verify: bool | str = True
        if tls.skip_verify:
            verify = False
        elif tls.ca_file:
            verify = tls.ca_file
        cert = (tls.cert_file, tls.key_file) if tls.cert_file and tls.key_file else None
        # hvac prefers a passed session's own verify/cert over its arguments (and a fresh
        # session verifies against the platform store), so the session carries them.
        session.verify = verify
        session.cert = cert
        self._adapter = RawAdapter(
            base_uri=self.address,
            token=None,
            cert=cert,
            verify=verify,
            timeout=timeout,
            session=session,
            namespace=namespace or None,
        )

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """Send one request to ``/v1/<path>``; a transport failure is a :class:`RemoteError`.

        The message names the path and the failure's class, never the response text.
        """
        headers = {"X-Vault-Token": token} if token else {}
        kwargs: dict[str, Any] = {}
        if body is not None:
            kwargs["json"] = dict(body)
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = self._adapter.request(
                method,
                f"/v1/{path.lstrip('/')}",
                headers=headers,
                raise_exception=False,
                **kwargs,
            )
        except requests.exceptions.SSLError:
            raise RemoteError(
                f"the TLS handshake with {self.address} failed on {path}; check --ca, "
                "--tls-server-name and the client certificate",
                origin=self._origin,
            ) from None
        except requests.exceptions.Timeout:
            raise RemoteError(
                f"{self.address} did not answer {path} within {self.timeout:g} s; "
                "check the server's health or raise --timeout",
                origin=self._origin,
            ) from None
        except (requests.exceptions.RequestException, OSError) as exc:
            raise RemoteError(
                f"{self.address} could not be reached for {path} ({type(exc).__name__}); "
                "check the endpoint and the network",
                origin=self._origin,
            ) from None
        return Answer(
            response.status_code,
            _json_body(response),
            retry_after(response.headers.get("Retry-After")),
        )

    def close(self) -> None:
        self._adapter.close()


def _json_body(response: requests.Response) -> Mapping[str, Any]:
    if not response.content:
        return {}
    try:
        body = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return {}
    return body if isinstance(body, dict) else {}
