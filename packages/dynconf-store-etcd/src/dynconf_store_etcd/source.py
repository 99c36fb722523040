"""The etcd source: one key read and watched through the v3 gRPC gateway (etcd3gw).

Blocking, not async: etcd3gw is a ``requests`` client, so the source implements
:class:`~dynconf.stores.RemoteSource` and the agent runs it in a worker thread. Wrapping a
blocking client in coroutines would only hide the same thread (contract: pick the trait the
client speaks, never wrap one in the other).

Authentication is the gateway's token: ``POST /v3/auth/authenticate`` trades the user and
password for a token sent as the ``Authorization`` header. etcd3gw has no auth of its own,
so the token lives on the client's ``requests`` session. A token the server calls invalid
(simple tokens expire after their TTL of idleness) is traded for a fresh one once.

Every answer is read within :func:`answer_bound` of the document ceiling
(:attr:`~dynconf.stores.StoreSpec.max_bytes`): a range answer past it is refused with the
engine's :class:`~dynconf.errors.OversizeError` before it is held whole (unread when its
``Content-Length`` says so), and a watch line past it ends the stream the same way.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final

from dynconf.errors import AuthError, DynconfError, Origin, OversizeError, RemoteError
from dynconf.limits import MAX_DOCUMENT_BYTES
from dynconf.sources import SourceSupport
from dynconf.store_http import (
    THROTTLE_STATUSES,
    BodyBound,
    HttpPolicy,
    retry_after,
    store_session,
)
from dynconf.stores import (
    ABSENT,
    Absent,
    Credential,
    Fetched,
    Pace,
    TlsSettings,
    layered,
    read_credential,
    same_document,
)
from dynconf_store_etcd.endpoint import Endpoint
from dynconf_store_etcd.plugin import EtcdStoreType
from dynconf_store_etcd.stream import STOP_SLICE, StreamEnded, StreamItem, WatchStream

if TYPE_CHECKING:
    import requests
    from etcd3gw.client import Etcd3Client

__all__ = ["DEFAULT_TIMEOUT", "KV_ENVELOPE", "EtcdSource", "answer_bound"]

log = logging.getLogger("dynconf.store.etcd")

DEFAULT_TIMEOUT: Final = 10.0
RECONNECT_BASE: Final = 0.5
"""Reconnect backoff base in seconds: 1 s, 2 s, 4 s … after consecutive failures."""
RECONNECT_CEILING: Final = 30.0
STALE_TOKEN_RECOVERIES: Final = 3
"""Consecutive expired-token recoveries of the stream before it is reported as refused."""

KV_ENVELOPE: Final = 1024
"""Bytes a range answer spends around one key-value beyond its base64 key and value, with
room to spare: the ``header`` (cluster and member ids, revision, raft term), the revisions,
``version``, ``lease``, ``count`` and a transaction's ``responses``/``response_range``."""


def answer_bound(ceiling: int, keys: Sequence[str]) -> BodyBound:
    """The most bytes a gateway answer may carry when each key's value is within ``ceiling``.

    The gateway writes a key-value as JSON whose ``key`` and ``value`` are base64 (the
    protobuf ``bytes`` mapping), which spells every 3 bytes (the last group padded) as 4 and
    needs no JSON escaping: a value of N bytes takes at most 4/3·N + 4 bytes, its key
    4/3·len(key) + 4, and the rest fits in :data:`KV_ENVELOPE`. A read of several keys (one
    transaction) is at most the sum over its keys; a watch line carries one such key-value per
    event. Every other answer (a login, an error) is far smaller.
    """
    longest = max(len(key.encode("utf-8")) for key in keys)
    envelope = KV_ENVELOPE + 4 + (4 * longest + 2) // 3 + 4
    return BodyBound.for_documents(
        ceiling, expansion=Fraction(4, 3), envelope=envelope, documents=len(keys)
    )


# gRPC status codes the gateway puts in its error bodies (google.golang.org/grpc/codes).
_INVALID_ARGUMENT: Final = 3
_PERMISSION_DENIED: Final = 7
_FAILED_PRECONDITION: Final = 9
_UNAUTHENTICATED: Final = 16


class _StaleToken(Exception):
    """The watch was refused because the token expired; log in again and re-open."""


class EtcdSource(SourceSupport):
    """Reads and watches one etcd key; ``revision`` is the key's ``mod_revision``."""

    reports_watching = True

    capability = EtcdStoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "etcd watch failure"
    failure_store = "etcd"

    def __init__(
        self,
        endpoint: Endpoint,
        key: str,
        format_name: str,
        *,
        described: str,
        username: str | None = None,
        password: Credential | None = None,
        tls: TlsSettings | None = None,
        timeout: float | None = None,
        policy: HttpPolicy | None = None,
        keys: Sequence[tuple[str, str]] = (),
        max_bytes: int | None = None,
    ) -> None:
        """``keys``: (key, format) pairs read in one transaction, at one revision, as one
        layered document (later keys win); empty: the one ``key``. ``max_bytes``: the
        document ceiling (the engine's 8 MiB when ``None``), which bounds every answer."""
        self._endpoint = endpoint
        self._policy = policy or HttpPolicy()
        self._key = key
        self._format = format_name
        self.description = described
        self._username = username
        self._password = password
        self._tls = tls or TlsSettings()
        self._timeout = timeout or DEFAULT_TIMEOUT
        self._client_instance: Etcd3Client | None = None
        self._token: str | None = None
        self._lock = threading.Lock()
        self._keys = tuple(keys)
        self._bound = answer_bound(
            max_bytes or MAX_DOCUMENT_BYTES, [each for each, _ in self._keys] or [key]
        )

    # -- protocol ---------------------------------------------------------------------

    @property
    def error_subject(self) -> str:
        """etcd errors name the key; the endpoint is in the origin (the description)."""
        return f"etcd key {self._key}"

    @property
    def auth_subject(self) -> str:
        """A refusal says it was etcd that refused, not the agent."""
        return f"etcd key {self._key}: etcd"

    def fetch(self) -> Fetched | Absent:
        answer, _revision = self._read()
        return answer

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Follow the key's watch stream; yield each put (Fetched) and delete (ABSENT).

        Each (re)connection first reads the key and opens the watch just past the read's
        revision, so nothing between the two is lost; after a reconnection the read is
        compared with the last answer and yielded when it moved (the resync). ``interval``
        is not a poll period here: the agent's own resync covers a silent stream.
        """
        pace = Pace(interval=RECONNECT_BASE, ceiling=max(RECONNECT_CEILING, interval))
        last: Fetched | Absent | None = None
        recoveries = 0
        while not stop():
            try:
                answer, revision = self._read()
                if last is not None and _moved(last, answer):
                    yield answer
                last = answer
                for answer in self._follow(revision + 1, stop, pace):
                    recoveries = 0
                    if _moved(last, answer):
                        last = answer
                        yield answer
                return
            except _StaleToken:
                recoveries += 1
                if recoveries > STALE_TOKEN_RECOVERIES:
                    error = self.auth_error(
                        "kept refusing fresh tokens for the watch; check the user's role"
                    )
                    self.report(error)
                    raise error from None
                self._invalidate_token()
                continue
            except AuthError as error:
                self.report(error)
                raise
            except (RemoteError, OversizeError) as error:
                # a value past the ceiling leaves the stream half-read: it is reopened after
                # a fresh read, which keeps refusing (bounded) until the value fits again
                self.report(error)
                pace.failed()
                self.pause(pace.next_wait(), stop)

    def close(self) -> None:
        with self._lock:
            client, self._client_instance, self._token = self._client_instance, None, None
        if client is not None:
            client.session.close()

    # -- reading ----------------------------------------------------------------------

    def _read(self) -> tuple[Fetched | Absent, int]:
        """The key's document (or ABSENT) and the store revision the read saw."""
        if self._keys:
            return self._read_keys()
        body = self._call("kv/range", {"key": _b64(self._key)})
        revision = _int(body.get("header", {}).get("revision"))
        kvs = body.get("kvs") or []
        if not kvs:
            return ABSENT, revision
        return self._document(kvs[0]), revision

    def _read_keys(self) -> tuple[Fetched | Absent, int]:
        """Every key in one transaction: etcd serves all its ranges at one revision."""
        ranges = [{"request_range": {"key": _b64(key)}} for key, _ in self._keys]
        body = self._call("kv/txn", {"success": ranges})
        revision = _int(body.get("header", {}).get("revision"))
        answers: list[Fetched | Absent] = []
        for (_key, format_name), response in zip(
            self._keys, body.get("responses") or [], strict=False
        ):
            kvs = (response.get("response_range") or {}).get("kvs") or []
            answers.append(replace(self._document(kvs[0]), format=format_name) if kvs else ABSENT)
        merged = layered(answers, revision=str(revision), origin=Origin.remote(self.description))
        return merged, revision

    def _document(self, kv: dict[str, Any]) -> Fetched:
        try:
            raw = base64.b64decode(kv.get("value", ""), validate=True)
            text = raw.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, TypeError):
            raise self.remote_error(
                "holds a value that is not UTF-8 text; store the document as UTF-8"
            ) from None
        return Fetched(text=text, format=self._format, revision=str(_int(kv.get("mod_revision"))))

    def _call(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST to the gateway; an invalid token is traded for a fresh one exactly once."""
        try:
            return self._post(path, payload)
        except _GatewayError as first:
            if first.code == _UNAUTHENTICATED and self._username:
                self._invalidate_token()
                try:
                    return self._post(path, payload)
                except _GatewayError as second:
                    raise self._translate(second) from None
            raise self._translate(first) from None

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        client = self._client()
        self._ensure_token(client)
        return self._send(client, path, payload)

    def _send(self, client: Etcd3Client, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        import requests

        try:
            response = client.session.post(
                client.get_url(path),
                json=payload,
                timeout=self._timeout,
                verify=client.session.verify,
            )
        except requests.exceptions.SSLError:
            raise self.remote_error(
                "TLS handshake failed; check --ca, --tls-cert/--tls-key and "
                "--tls-server-name against the server's certificate"
            ) from None
        except requests.exceptions.Timeout:
            raise self.remote_error(
                f"did not answer within {self._timeout:g} s; check the endpoint"
            ) from None
        except requests.exceptions.RequestException as exc:
            raise self.remote_error(
                f"could not be reached ({type(exc).__name__}); check the endpoint and that "
                "etcd is running"
            ) from None
        body = _json(response)
        if response.status_code != 200:
            self._refuse_named_certificate(response)
            raise _GatewayError(
                response.status_code, body, retry_after(response.headers.get("Retry-After"))
            )
        return body

    def _refuse_named_certificate(self, response: requests.Response) -> None:
        """etcd's gateway refuses, in plain text, a client certificate with a CommonName
        while auth is on (it cannot pass the name on as the user): waiting will not help."""
        if response.status_code == 400 and b"CommonName" in response.content[:200]:
            raise self.auth_error(
                "refused the client certificate: with username/password auth on, the "
                "gateway takes only certificates without a CommonName; issue one whose "
                "identity is in the subjectAltName, or drop --auth-username"
            )

    # -- the watch ----------------------------------------------------------------------

    def _follow(
        self, start_revision: int, stop: Callable[[], bool], pace: Pace
    ) -> Iterator[Fetched | Absent]:
        """Yield the answers one watch stream carries, until stop; raise when it breaks."""
        stream = self._open_stream(start_revision)
        try:
            while not stop():
                item = stream.next(STOP_SLICE)
                if item is None:
                    continue
                if isinstance(item, StreamEnded):
                    if isinstance(item.failure, OversizeError):
                        raise item.failure
                    if item.failure is None:
                        raise self.remote_error("closed the watch stream")
                    raise self.remote_error(
                        f"broke the watch stream ({type(item.failure).__name__})"
                    )
                yield from self._answers(item, pace)
        finally:
            stream.close()

    def _open_stream(self, start_revision: int) -> WatchStream:
        import requests

        client = self._client()
        self._ensure_token(client)
        create = {"key": _b64(self._key), "start_revision": start_revision}
        if self._keys:  # one range over every key; an event in between costs a re-read
            names = sorted(key for key, _ in self._keys)
            create = {
                "key": _b64(names[0]),
                "range_end": _b64(names[-1] + "\0"),
                "start_revision": start_revision,
            }
        request: dict[str, Any] = {"create_request": create}
        try:
            response = client.session.post(
                client.get_url("watch"),
                json=request,
                stream=True,
                timeout=(self._timeout, None),
                verify=client.session.verify,
            )
        except requests.exceptions.RequestException as exc:
            raise self.remote_error(
                f"could not open the watch stream ({type(exc).__name__})"
            ) from None
        if response.status_code != 200:
            self._refuse_named_certificate(response)
            error = _GatewayError(response.status_code, _json(response))
            response.close()
            if error.code == _UNAUTHENTICATED and self._username:
                raise _StaleToken
            raise self._translate(error)
        return WatchStream(response, self._bound)

    def _answers(self, item: StreamItem, pace: Pace) -> Iterator[Fetched | Absent]:
        if item.error is not None:
            code = _int(item.error.get("grpc_code", item.error.get("code")))
            if code == _UNAUTHENTICATED and self._username:
                raise _StaleToken
            raise self._translate(_GatewayError(_int(item.error.get("http_code")), item.error))
        result = item.result or {}
        if result.get("canceled"):
            self._cancelled(result)
        if result.get("created"):
            pace.succeeded()
            if self.on_watching is not None:
                self.on_watching()
            return
        if self._keys:
            if result.get("events"):
                yield self._read_keys()[0]
            return
        for event in result.get("events") or []:
            kv = event.get("kv") or {}
            if event.get("type") == "DELETE":
                yield ABSENT
            else:
                yield self._document(kv)

    def _cancelled(self, result: dict[str, Any]) -> None:
        """A cancelled watch: compaction resyncs, a refused token logs in, the rest refuse.

        The cancel reason is the only signal etcd gives here (no status code), so this is
        the one place that reads a server message: etcd's fixed reason strings.
        """
        reason = str(result.get("cancel_reason", ""))
        if _int(result.get("compact_revision")):
            raise self.remote_error(
                "compacted past the watch's revision; re-reading the key and watching again"
            )
        stale = "invalid auth token" in reason or "revision of auth store is old" in reason
        if stale and self._username:
            raise _StaleToken
        if "permission denied" in reason or "user name is empty" in reason:
            raise self.auth_error(
                "refused to watch the key (permission denied); grant the user's role read "
                "access to it"
            )
        raise self.remote_error("cancelled the watch; it will be opened again")

    # -- the client and its token -----------------------------------------------------

    def _client(self) -> Etcd3Client:
        with self._lock:
            if self._client_instance is None:
                self._client_instance = self._build_client()
            return self._client_instance

    def _build_client(self) -> Etcd3Client:
        """A fresh etcd3gw client; the trust files are read by its first connection."""
        import etcd3gw

        # The password (in the login body) and the token header reach this endpoint only:
        # no environment proxy, and no redirect elsewhere (requests re-POSTs the body to a
        # 307/308 Location).
        host = f"[{self._endpoint.host}]" if ":" in self._endpoint.host else self._endpoint.host
        session = store_session(
            self._policy,
            endpoint=f"{self._endpoint.scheme}://{host}:{self._endpoint.port}",
            subject=self.error_subject,
            origin=Origin.remote(self.description),
            bound=self._bound,
        )
        if self._tls.ca_file:
            session.verify = self._tls.ca_file
        if self._tls.cert_file and self._tls.key_file:
            session.cert = (self._tls.cert_file, self._tls.key_file)
        client = etcd3gw.client(
            host=self._endpoint.host,
            port=self._endpoint.port,
            protocol=self._endpoint.scheme,
            timeout=self._timeout,
            api_path="/v3/",
            session=session,
        )
        if self._tls.skip_verify:
            log.warning(
                "tls_skip_verify",
                extra={"store": "etcd", "source": self.description},
            )
            client.session.verify = False
        if self._tls.server_name:
            client.session.mount("https://", _server_name_adapter(self._tls.server_name))
        return client

    def _ensure_token(self, client: Etcd3Client) -> None:
        if not self._username:
            return
        with self._lock:
            if self._token is not None:
                return
            client.session.headers.pop("Authorization", None)
            try:
                body = self._send(
                    client,
                    "auth/authenticate",
                    {
                        "name": self._username,
                        "password": read_credential(self._password, "password") or "",
                    },
                )
            except _GatewayError as error:
                raise self._login_error(error) from None
            token = body.get("token")
            if not isinstance(token, str) or not token:
                raise self.remote_error("answered the login without a token")
            self._token = token
            client.session.headers["Authorization"] = token

    def _invalidate_token(self) -> None:
        with self._lock:
            self._token = None
            if self._client_instance is not None:
                self._client_instance.session.headers.pop("Authorization", None)

    # -- errors -------------------------------------------------------------------------

    def _translate(self, error: _GatewayError) -> DynconfError:
        if error.code in (_UNAUTHENTICATED, _PERMISSION_DENIED):
            what = "refused the token" if error.code == _UNAUTHENTICATED else "denied access"
            return self.auth_error(f"{what} for the key; check the user's role grants read on it")
        said = f"answered HTTP {error.status} (gRPC code {error.code})"
        if error.status in THROTTLE_STATUSES:
            return self.throttled_error(said, error.retry_after)
        return self.remote_error(said)

    def _login_error(self, error: _GatewayError) -> DynconfError:
        if error.code == _FAILED_PRECONDITION and "not enabled" in error.message:
            return self.remote_error(
                "has authentication disabled; remove --auth-username or enable auth in etcd"
            )
        if error.code in (_INVALID_ARGUMENT, _FAILED_PRECONDITION, _PERMISSION_DENIED):
            return self.auth_error(
                f"refused the login of user {self._username}; check the user and its "
                "password Secret"
            )
        return self.remote_error(
            f"failed the login with HTTP {error.status} (gRPC code {error.code})"
        )


class _GatewayError(Exception):
    """A non-200 gateway answer: its HTTP status, gRPC code and server message."""

    def __init__(self, status: int, body: dict[str, Any], retry_after: float | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.retry_after = retry_after
        self.code = _int(body.get("code", body.get("grpc_code")))
        self.message = str(body.get("message", body.get("error", "")))


def _server_name_adapter(server_name: str) -> requests.adapters.HTTPAdapter:
    """An adapter that sends ``server_name`` as SNI and verifies the certificate for it."""
    from requests.adapters import HTTPAdapter

    class ServerNameAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["server_hostname"] = server_name
            kwargs["assert_hostname"] = server_name
            super().init_poolmanager(*args, **kwargs)

    return ServerNameAdapter()


def _moved(last: Fetched | Absent, answer: Fetched | Absent) -> bool:
    """A new document, or the same text at a new revision (a put of the same value)."""
    if isinstance(last, Fetched) and isinstance(answer, Fetched):
        return last.revision != answer.revision or not same_document(last, answer)
    return not same_document(last, answer)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _int(value: object) -> int:
    """The gateway writes int64 as strings and omits zeros; anything else counts as 0."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return 0


def _json(response: requests.Response) -> dict[str, Any]:
    try:
        body = json.loads(response.content or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
