"""The config-server client: ``GET /<application>/<profile>``, pushed over server-sent events.

``fetch`` reads the envelope ``{application, profile, generation, config}`` and answers the
``config`` member as JSON text with the generation as revision. A JSON object that is not
the envelope (its keys are not exactly those four) is the resolved document itself — the
answer of a config server written in any language — answered verbatim, with its ``ETag`` as
revision. 401 and 403 are ``auth``
(the server refused the credential); 404 is :data:`ABSENT` (the server answers the same
404 for "not yours" and "not there", on purpose); everything else is ``remote``.

``changes`` holds ``GET /<application>/<profile>/stream`` open. Each event carries only a
generation number; the client then fetches the document and delivers it when its text
differs from the last one delivered. ``Last-Event-ID`` resumes a subscription; after a
dropped stream (a restarted server, a cut network) it reconnects with
:class:`~dynconf.stores.Pace` backoff and resyncs with one fetch, so a change made while
it was away is delivered once it is back. A server that answers the document but 404 for
its stream has no stream: the client then asks for the document every ``interval`` instead.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dynconf.errors import AuthError, DynconfError, Origin
from dynconf.sources import SourceSupport
from dynconf.store_http import HttpPolicy, retry_after, store_session
from dynconf.stores import (
    ABSENT,
    Absent,
    Credential,
    Fetched,
    Pace,
    TlsSettings,
    read_credential,
    same_document,
)
from dynconf_store_configserver.plugin import ConfigServerStoreType

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_BODY",
    "MAX_EVENT",
    "SILENCE",
    "ConfigServerSource",
    "FileBearer",
    "StaticBearer",
]

DEFAULT_TIMEOUT: Final = 10.0
MAX_BODY: Final = 1024 * 1024
"""The largest document envelope the client reads."""
ENVELOPE: Final = frozenset({"application", "profile", "generation", "config"})
"""The envelope's keys: a JSON object with exactly these is an envelope, any other object is
the document itself."""
MAX_EVENT: Final = 64 * 1024
"""The largest server-sent event the client accepts (events carry only a generation)."""
SILENCE: Final = 50.0
"""Seconds without a byte after which a stream is dead (the server keeps alive every 15 s)."""
_SLICE: Final = 0.25

log = logging.getLogger("dynconf.store.configserver")


@dataclass(frozen=True)
class StaticBearer:
    """A token given once (the token slot), or none."""

    token: Credential | None = field(default=None, repr=False)

    def current(self, describe: str) -> str | None:
        return read_credential(self.token)


@dataclass(frozen=True)
class FileBearer:
    """A token file (the projected service-account token), re-read at every request."""

    path: str

    def current(self, describe: str) -> str | None:
        try:
            text = Path(self.path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise AuthError(
                f"{describe} cannot read the service-account token at {self.path} "
                f"({exc.strerror or type(exc).__name__}); mount a projected token there or "
                "set --auth-token-path",
                origin=Origin.remote(describe),
            ) from None
        if not text:
            raise AuthError(
                f"{describe} found an empty service-account token at {self.path}",
                origin=Origin.remote(describe),
            )
        return text


@dataclass
class _Event:
    id: str | None = None
    name: str | None = None
    data: list[str] = field(default_factory=list)


class _StreamEnded(Exception):
    """The server closed the stream, or it fell silent (reason in ``args[0]``)."""


class ConfigServerSource(SourceSupport):
    """A blocking :class:`~dynconf.stores.RemoteSource` over one config-server section."""

    capability = ConfigServerStoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "config-server watch failed; retrying"

    def __init__(
        self,
        url: str,
        application: str,
        profile: str,
        bearer: StaticBearer | FileBearer,
        tls: TlsSettings,
        *,
        description: str,
        timeout: float = DEFAULT_TIMEOUT,
        on_failure: Callable[[DynconfError], None] | None = None,
        policy: HttpPolicy | None = None,
    ) -> None:
        self._url = url
        self._policy = policy or HttpPolicy()
        self._document_url = f"{url}/{application}/{profile}"
        self._bearer = bearer
        self._tls = tls
        self.description = description
        self._timeout = timeout
        self.on_failure = on_failure
        self.connected = False
        """True while a stream is open."""
        self._session: Any = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ http
    def _http(self) -> Any:
        """The requests session, built on first use with the trust files checked by path."""
        with self._lock:
            if self._session is None:
                self._session = self._build_session()
            return self._session

    def _build_session(self) -> Any:
        tls = self._tls
        for label, path in (("--ca", tls.ca_file), ("--tls-cert", tls.cert_file),
                            ("--tls-key", tls.key_file)):  # fmt: skip
            if path and not Path(path).is_file():
                raise self.remote_error(f"has no readable {label} file at {path}; mount it")
        # The bearer reaches this server only: no environment proxy or netrc, and no
        # redirect to another origin (refused with the setting that opts in).
        session = store_session(
            self._policy,
            endpoint=self._url,
            subject=self.description,
            origin=Origin.remote(self.description),
        )
        if tls.ca_file:
            session.verify = tls.ca_file
        elif tls.skip_verify:
            log.warning(
                "store_tls_skip_verify",
                extra={"store": self.description},
            )
            session.verify = False
        if tls.cert_file and tls.key_file:
            session.cert = (tls.cert_file, tls.key_file)
        if tls.server_name:
            session.mount("https://", _server_name_adapter(tls.server_name))
        return session

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        token = self._bearer.current(self.description)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _get(self, url: str, headers: dict[str, str], *, stream: bool,
             read_timeout: float) -> Any:  # fmt: skip
        import requests

        try:
            return self._http().get(
                url,
                headers=headers,
                stream=stream,
                timeout=(self._timeout, read_timeout),
                allow_redirects=self._policy.follow_redirects,
            )
        except requests.exceptions.SSLError:
            raise self.remote_error(
                "refused the TLS handshake; check --ca, --tls-server-name and the client "
                "certificate"
            ) from None
        except requests.exceptions.Timeout:
            raise self.remote_error(f"did not answer within {self._timeout:g} s") from None
        except requests.exceptions.ConnectionError:
            raise self.remote_error(
                "cannot be reached; check the endpoint and that it runs"
            ) from None
        except requests.exceptions.RequestException as exc:
            raise self.remote_error(f"request failed ({type(exc).__name__})") from None
        except OSError as exc:
            raise self.remote_error(f"could not set up TLS ({type(exc).__name__})") from None

    def _refusal(self, code: int, headers: Mapping[str, str] | None = None) -> DynconfError | None:
        if code in (401, 403):
            return self.auth_error(
                f"refused the credential ({code}); check the client token or the "
                "service-account grant in the server's configuration"
            )
        if code == 404:
            return None
        wait = retry_after((headers or {}).get("Retry-After"))
        if code == 503:
            return self.throttled_error("has no document for the section yet (503); retrying", wait)
        if code == 429:
            return self.throttled_error("is rate-limiting (429); retrying", wait)
        return self.remote_error(f"answered {code}; retrying")

    # ------------------------------------------------------------------ fetch
    def fetch(self) -> Fetched | Absent:
        """Read the section now: its document, or ABSENT when the server answers 404."""
        response = self._get(
            self._document_url, self._headers("application/json"), stream=True,
            read_timeout=self._timeout,
        )  # fmt: skip
        with response:
            if response.status_code == 404:
                return ABSENT
            if response.status_code != 200:
                error = self._refusal(int(response.status_code), response.headers)
                assert error is not None
                raise error
            body = response.raw.read(MAX_BODY + 1, decode_content=True)
        if len(body) > MAX_BODY:
            raise self.remote_error(f"answered a body larger than {MAX_BODY} bytes")
        try:
            text = body.decode("utf-8")
            answered = json.loads(text)
        except (UnicodeDecodeError, ValueError):
            raise self.remote_error(
                "answered a body that is not JSON; is this a config server?"
            ) from None
        if not isinstance(answered, dict):
            raise self.remote_error(
                "answered JSON that is not an object; a config server answers its envelope "
                "or the document itself, and a document is an object"
            )
        if answered.keys() != ENVELOPE:
            # The resolved document itself: the bytes the server chose, and its ETag.
            etag = response.headers.get("ETag")
            return Fetched(text=text, format="json", revision=_etag_revision(etag))
        if not isinstance(answered["config"], dict):
            raise self.remote_error(
                "answered an envelope whose `config` is not an object; is this a config server?"
            )
        generation = answered["generation"]
        return Fetched(
            text=json.dumps(answered["config"], ensure_ascii=False),
            format="json",
            revision=str(generation) if isinstance(generation, int) else None,
        )

    # ------------------------------------------------------------------ watch
    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield each new document (or ABSENT once) the stream announces, until ``stop()``.

        The opening event primes (nothing is delivered for it); stopping takes about
        250 ms. ``interval`` is the reconnect pace after a dropped stream, and the polling
        interval for a server that answers the document but 404 for its stream.
        """
        pace = Pace(max(interval, 0.5))
        last: Fetched | Absent | None = None
        resume: str | None = None
        dropped = False
        streamless: Fetched | None = None
        while not stop():
            try:
                for event_id in self._events(resume, stop):
                    if event_id is ABSENT:  # 404: gone, not granted, or no stream at all
                        answer = self.fetch()
                        if isinstance(answer, Fetched):
                            streamless = answer
                            break
                        if last is not None and last is not ABSENT:
                            yield ABSENT
                        last = ABSENT
                        continue
                    if event_id is None:  # the stream is open
                        pace.succeeded()
                        if not dropped:
                            continue
                        dropped = False  # resync: what changed while we were away
                    answer = self.fetch()
                    if last is not None and not same_document(answer, last):
                        yield answer
                    last = answer
                    if isinstance(event_id, str):
                        resume = event_id
                if streamless is not None:  # the stream's 404 closed above, on leaving it
                    yield from self._poll(streamless, last, interval, stop)
                    return
            except AuthError:
                self.connected = False
                raise
            except DynconfError as exc:
                self.connected = False
                self.report(exc)
            except _StreamEnded as ended:
                self.connected = False
                self.report(self.remote_error(str(ended.args[0])))
            if stop():
                return
            dropped = True
            pace.failed()
            if self.pause(pace.next_wait(), stop):
                return

    def _poll(
        self,
        answer: Fetched | Absent,
        last: Fetched | Absent | None,
        interval: float,
        stop: Callable[[], bool],
    ) -> Iterator[Fetched | Absent]:
        """Ask for the document every ``interval`` (a server that answers it but has no stream).

        ``answer`` is the fetch that showed the document is there; like the stream's opening
        event, the first answer primes and is delivered only if it differs from ``last``.
        """
        log.info(
            "config_server_polling",
            extra={"store": self.description, "interval": interval},
        )
        while True:
            if last is not None and not same_document(answer, last):
                yield answer
            last = answer
            if self.pause(max(interval, 0.5), stop):
                return
            try:
                answer = self.fetch()
            except AuthError:
                raise
            except DynconfError as exc:
                self.report(exc)
                answer = last

    def _events(
        self, resume: str | None, stop: Callable[[], bool]
    ) -> Iterator[str | Absent | None]:
        """Yield ``None`` once the stream is open, then each event's id; raise when it ends.

        A 404 yields ABSENT and then ends like a dropped stream (the watch retries with
        backoff, so a section that appears later is picked up).
        """
        headers = self._headers("text/event-stream")
        if resume is not None:
            headers["Last-Event-ID"] = resume
        response = self._get(f"{self._document_url}/stream", headers, stream=True,
                             read_timeout=SILENCE)  # fmt: skip
        try:
            if response.status_code == 404:
                yield ABSENT
                raise _StreamEnded("answered 404 for the stream; waiting for the section")
            if response.status_code != 200:
                error = self._refusal(int(response.status_code), response.headers)
                assert error is not None
                raise error
            self.connected = True
            yield None
            events: queue.Queue[_Event | BaseException | None] = queue.Queue()
            reader = threading.Thread(
                target=_read_events, args=(response, events), daemon=True,
                name="dynconf-configserver-stream",
            )  # fmt: skip
            reader.start()
            while not stop():
                try:
                    item = events.get(timeout=_SLICE)
                except queue.Empty:
                    continue
                if item is None:
                    raise _StreamEnded("closed the stream; reconnecting")
                if isinstance(item, BaseException):
                    raise _StreamEnded(f"stream failed ({type(item).__name__}); reconnecting")
                if item.name in (None, "generation") and item.id is not None:
                    yield item.id
        finally:
            response.close()
            self.connected = False

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()

    # ------------------------------------------------------------------ internals
    def __repr__(self) -> str:
        return f"ConfigServerSource({self.description!r})"


def _etag_revision(etag: str | None) -> str | None:
    """An ``ETag`` as a revision: its opaque part, without ``W/`` and the quotes."""
    if not etag:
        return None
    tag = etag.strip().removeprefix("W/").strip('"')
    return tag or None


def _read_events(response: Any, out: queue.Queue[_Event | BaseException | None]) -> None:
    """Parse the SSE body into events on a thread (so the watch can stop at any moment)."""
    event = _Event()
    size = 0
    try:
        for raw in response.iter_lines(chunk_size=1, decode_unicode=False):
            line = raw.decode("utf-8", errors="replace")
            size += len(raw) + 1
            if size > MAX_EVENT:
                out.put(ValueError("event larger than 64 KiB"))
                return
            if not line:
                if event.id is not None or event.data:
                    out.put(event)
                event, size = _Event(), 0
                continue
            if line.startswith(":"):
                size = 0 if event.id is None and not event.data else size
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "id":
                event.id = value
            elif name == "event":
                event.name = value
            elif name == "data":
                event.data.append(value)
        out.put(None)
    except Exception as exc:
        out.put(exc)


def _server_name_adapter(name: str) -> Any:
    """An HTTPS adapter that sends ``name`` as SNI and verifies the certificate against it."""
    from requests.adapters import HTTPAdapter

    class ServerNameAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["server_hostname"] = name
            kwargs["assert_hostname"] = name
            super().init_poolmanager(*args, **kwargs)

    return ServerNameAdapter()
