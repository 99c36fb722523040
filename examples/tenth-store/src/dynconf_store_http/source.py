"""The ``http`` client: ``GET`` for the document, conditional ``GET`` to watch it.

The store's answers map onto the store contract like this:

* 200 — the document; its ``ETag`` (or, failing that, ``Last-Modified``) is the revision;
* 304 — unchanged since the marker we sent (only in ``changes``);
* 404 and 410 — :data:`~dynconf.stores.ABSENT`: the agent's ``--on-delete`` policy decides;
* 401 and 403 — :class:`~dynconf.errors.AuthError`: retrying cannot heal a refused credential;
* anything else, and every transport failure — :class:`~dynconf.errors.RemoteError`, retried.

Redirects are not followed: a credential must not travel to a host the endpoint did not name.
Proxies from the environment are ignored for the same reason. Error messages name the status
and the redacted URL, never a body (a body may echo the credential or carry the document).
"""

from __future__ import annotations

import base64
import logging
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.client import HTTPResponse
from typing import Final

from dynconf.errors import AuthError, DynconfError, Origin, RemoteError
from dynconf.stores import (
    ABSENT,
    Absent,
    Fetched,
    Pace,
    TlsSettings,
    WatchCapability,
    report_failure,
    report_watching,
)

__all__ = ["DEFAULT_TIMEOUT", "MAX_BODY", "HttpSource"]

DEFAULT_TIMEOUT: Final = 10.0
MAX_BODY: Final = 8 * 1024 * 1024
"""The largest body read; the agent's own --max-document-bytes applies after this."""
_SLICE: Final = 0.25
"""Seconds between stop checks while waiting, so a stop takes at most this plus one request."""

log = logging.getLogger("dynconf.store.http")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Turn every redirect into an error response instead of following it."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class HttpSource:
    """A blocking :class:`~dynconf.stores.RemoteSource` over one document URL."""

    capability = WatchCapability.CONDITIONAL

    def __init__(
        self,
        url: str,
        format_name: str,
        tls: TlsSettings,
        *,
        description: str,
        token: str | None = None,
        token_header: str | None = None,
        basic: tuple[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        # Constructing does no I/O: the trust files are read when the first request is made.
        self._url = url
        self._format = format_name
        self._tls = tls
        self._description = description
        self._credential: tuple[str, str] | None = None
        """The header that carries the credential, and its value (never logged)."""
        if token and token_header:
            self._credential = (token_header, token)
        elif token:
            self._credential = ("Authorization", f"Bearer {token}")
        elif basic is not None:
            pair = f"{basic[0]}:{basic[1]}".encode()
            self._credential = ("Authorization", f"Basic {base64.b64encode(pair).decode('ascii')}")
        self._timeout = timeout
        self._opener: urllib.request.OpenerDirector | None = None

    def __repr__(self) -> str:
        return f"HttpSource({self._description!r})"

    def describe(self) -> str:
        return self._description

    # ------------------------------------------------------------------ requests
    def _remote(self, what: str) -> RemoteError:
        return RemoteError(f"{self._description} {what}", origin=Origin.remote(self._description))

    def _build_opener(self) -> urllib.request.OpenerDirector:
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.ProxyHandler({}),
            _NoRedirect(),
        ]
        if self._url.startswith("https://"):
            tls = self._tls
            try:
                context = ssl.create_default_context(cafile=tls.ca_file)
                if tls.cert_file and tls.key_file:
                    context.load_cert_chain(tls.cert_file, tls.key_file)
            except OSError as exc:
                raise self._remote(
                    f"cannot load its TLS files ({exc.strerror or type(exc).__name__}); "
                    "check --ca, --tls-cert and --tls-key"
                ) from None
            if tls.skip_verify:
                log.warning(
                    "http TLS verification is off (--tls-skip-verify)",
                    extra={"event": "store_tls_skip_verify", "store": self._description},
                )
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            handlers.append(urllib.request.HTTPSHandler(context=context))
        return urllib.request.build_opener(*handlers)

    def _request(self, marker: str | None) -> Fetched | Absent | None:
        """One GET; ``None`` means 304 (unchanged since ``marker``)."""
        if self._opener is None:
            self._opener = self._build_opener()
        request = urllib.request.Request(self._url, method="GET")  # noqa: S310 - scheme checked
        if self._credential is not None:
            request.add_unredirected_header(*self._credential)
        if marker is not None:
            name = "If-Modified-Since" if marker.startswith("date:") else "If-None-Match"
            request.add_header(name, marker.removeprefix("date:"))
        try:
            response: HTTPResponse = self._opener.open(request, timeout=self._timeout)
        except urllib.error.HTTPError as exc:
            exc.close()
            return self._refusal(exc.code)
        except (TimeoutError, ssl.SSLError) as exc:
            what = "did not answer in time" if isinstance(exc, TimeoutError) else (
                "refused the TLS handshake; check --ca and the client certificate"
            )  # fmt: skip
            raise self._remote(what) from None
        except (urllib.error.URLError, OSError):
            raise self._remote("cannot be reached; check the endpoint and that it runs") from None
        with response:
            body = response.read(MAX_BODY + 1)
            etag = response.headers.get("ETag")
            modified = response.headers.get("Last-Modified")
        if len(body) > MAX_BODY:
            raise self._remote(f"answered a body larger than {MAX_BODY} bytes")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise self._remote("answered a body that is not UTF-8") from None
        revision = etag or (f"date:{modified}" if modified else None)
        return Fetched(text=text, format=self._format, revision=revision)

    def _refusal(self, code: int) -> Absent | None:
        if code == 304:
            return None
        if code in (404, 410):
            return ABSENT
        if code in (401, 403):
            raise AuthError(
                f"{self._description} refused the credential ({code}); check --auth and the "
                "token or password",
                origin=Origin.remote(self._description),
            )
        if 300 <= code < 400:
            raise self._remote(f"answered a redirect ({code}); point the endpoint at its target")
        raise self._remote(f"answered {code}; retrying")

    # ------------------------------------------------------------------ contract
    def fetch(self) -> Fetched | Absent:
        """Read the document now (an unconditional GET)."""
        answer = self._request(None)
        assert answer is not None  # no marker sent, so never 304
        return answer

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield each new document (or ABSENT once) a conditional GET finds, until ``stop()``.

        The first answer primes the marker and yields nothing. A server that sends neither
        ETag nor Last-Modified is compared by text, so an identical document stays quiet.
        """
        pace = Pace(interval)
        primed = False
        last: Fetched | Absent | None = None
        while not stop():
            try:
                marker = last.revision if isinstance(last, Fetched) else None
                answer = self._request(marker)
                report_watching(self)
                pace.succeeded()
                if answer is not None:
                    moved = (
                        not isinstance(answer, Fetched)
                        or not isinstance(last, Fetched)
                        or answer.text != last.text
                    )
                    if primed and moved and not (answer is ABSENT and last is ABSENT):
                        yield answer
                    primed, last = True, answer
            except AuthError:
                raise
            except DynconfError as exc:
                report_failure(self, exc)
                pace.failed()
            if self._pause(pace.next_wait(), stop):
                return

    @staticmethod
    def _pause(seconds: float, stop: Callable[[], bool]) -> bool:
        """Wait in slices so ``stop()`` is honoured quickly; True when it asked to stop."""
        import time

        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if stop():
                return True
            time.sleep(min(_SLICE, left))
        return stop()

    def close(self) -> None:
        """Nothing is pooled: urllib opens a connection per request."""
        self._opener = None
