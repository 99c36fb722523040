"""The Firestore source: one document's fields read as a JSON document, watched by a listener.

``fetch`` is one ``GetDocument`` call: the snapshot's fields converted by
:mod:`dynconf_store_firestore.convert`, the document's ``update_time`` (RFC 3339) as the
revision, :data:`ABSENT` when the document does not exist. Firestore bounds a document at
1 MiB, so the read itself is bounded by the server; a document whose JSON text cannot fit
the ceiling (:attr:`~dynconf.stores.StoreSpec.max_bytes`, measured by
:func:`~dynconf_store_firestore.convert.text_size_floor`) is refused with the engine's
:class:`~dynconf.errors.OversizeError` before it is converted.

``changes`` is the push watch: a snapshot listener (Firestore's ``Listen`` stream, through
the client library's ``on_snapshot``). The library re-opens the stream after transient
failures on its own, so an emulator or a frontend that restarts is ridden through and the
first snapshot after it is compared like any other. When the listener stops for good
(a terminating status such as PERMISSION_DENIED), one plain fetch decides: a refused
credential is raised, anything else is reported and the listener re-opened after a
:class:`~dynconf.stores.Pace` backoff.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from dynconf.errors import AuthError, DynconfError, OversizeError
from dynconf.render import DEFAULT_MAX_DOCUMENT_BYTES, check_byte_count
from dynconf.sources import SourceSupport
from dynconf.store_http import note_ignored_proxy
from dynconf.stores import (
    ABSENT,
    Absent,
    Credential,
    Fetched,
    Pace,
    read_credential,
    same_document,
)
from dynconf_store_firestore.convert import (
    UnconvertibleField,
    plain_document,
    rfc3339,
    text_size_floor,
)
from dynconf_store_firestore.plugin import FirestoreStoreType, Target

__all__ = ["DEFAULT_TIMEOUT", "Connection", "FailureSink", "FirestoreSource"]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds one read may take (the reference store's default)."""
_SLICE: Final = 0.25
"""How often a waiting watch checks ``stop()`` and the listener's health."""

FailureSink = Callable[[DynconfError], None]

log = logging.getLogger("dynconf.store.firestore")

# gRPC status names that mean the credential itself was refused; everything else is remote.
_AUTH_STATUSES: Final = frozenset({"UNAUTHENTICATED", "PERMISSION_DENIED"})


@dataclass(frozen=True)
class Connection:
    """How to reach the database: target, auth method and where the API is."""

    target: Target
    method: str
    emulator: str | None = None
    api_endpoint: str | None = None
    token: Credential | None = field(default=None, repr=False)
    use_proxy: bool = False
    """Let gRPC use ``grpc_proxy`` / ``https_proxy`` / ``http_proxy`` (``use_proxy=true``)."""


class FirestoreSource(SourceSupport):
    """A blocking :class:`~dynconf.stores.RemoteSource` over one Firestore document."""

    capability = FirestoreStoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "firestore watch failed; retrying"

    def __init__(
        self,
        connection: Connection,
        *,
        description: str,
        timeout: float = DEFAULT_TIMEOUT,
        on_failure: FailureSink | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """``max_bytes``: the document ceiling (the engine's 8 MiB when ``None``)."""
        self._connection = connection
        self._max_bytes = max_bytes or DEFAULT_MAX_DOCUMENT_BYTES
        self.description = description
        self._timeout = timeout
        self.on_failure = on_failure
        self.connected = False
        """True while a listener is open and has delivered its first snapshot."""
        self._client: Any = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ client
    def _document(self) -> Any:
        """The document reference; the client is built on first use (constructors do no I/O)."""
        with self._lock:
            if self._client is None:
                self._client = self._build_client()
            return self._client.document(self._connection.target.path)

    def _build_client(self) -> Any:
        from google.cloud import firestore

        conn = self._connection
        credentials: Any
        options: dict[str, str] | None = None
        if conn.method == "emulator":
            from google.auth.credentials import AnonymousCredentials

            credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
        elif conn.method == "access-token":
            from google.oauth2.credentials import Credentials

            credentials = Credentials(token=read_credential(conn.token))  # type: ignore[no-untyped-call]
        elif conn.use_proxy:
            from google.auth import compute_engine

            credentials = compute_engine.Credentials()  # type: ignore[no-untyped-call]
        else:
            credentials = _direct_metadata_credentials(self.description)
        if conn.api_endpoint:
            options = {"api_endpoint": conn.api_endpoint}
        if not conn.use_proxy:
            note_ignored_proxy(self.description)
        client_class = firestore.Client if conn.use_proxy else _direct_client_class()
        client = client_class(
            project=conn.target.project,
            database=conn.target.database,
            credentials=credentials,
            client_options=options,
        )
        # The library reads FIRESTORE_EMULATOR_HOST from the environment when a client is
        # built and then silently talks plain HTTP/2 to it. The spec decides instead: the
        # emulator's address for --auth emulator, never the variable for the other methods.
        client._emulator_host = conn.emulator
        return client

    # ------------------------------------------------------------------ fetch
    def fetch(self) -> Fetched | Absent:
        """Read the document now: its fields as JSON, or ABSENT when it does not exist."""
        document = self._document()
        try:
            snapshot = document.get(retry=None, timeout=self._timeout)
        except Exception as exc:
            raise self._classify(exc) from None
        return self._answer(snapshot if snapshot.exists else None)

    def _answer(self, snapshot: Any | None) -> Fetched | Absent:
        if snapshot is None:
            return ABSENT
        fields = snapshot.to_dict() or {}
        check_byte_count(text_size_floor(fields), self._max_bytes)
        try:
            document = plain_document(fields)
        except UnconvertibleField as exc:
            raise self.remote_error(
                f"field `{exc.path}` holds a {exc.type_name}, which has no plain-document "
                "rule; store it as one of the documented types"
            ) from None
        text = json.dumps(document, sort_keys=True, ensure_ascii=False)
        updated = snapshot.update_time
        return Fetched(
            text=text, format="json", revision=rfc3339(updated) if updated is not None else None
        )

    def _classify(self, exc: BaseException) -> DynconfError:
        """A typed error from a client exception, decided on the status code, never its text."""
        from google.api_core import exceptions as api
        from google.auth import exceptions as auth

        if isinstance(exc, DynconfError):
            return exc
        if isinstance(exc, api.GoogleAPICallError):
            status = getattr(exc.grpc_status_code, "name", None) or str(exc.code)
            if status in _AUTH_STATUSES:
                return self.auth_error(
                    f"refused the credential ({status}); check the workload's IAM role "
                    "(roles/datastore.viewer) or replace the access token"
                )
            if status == "RESOURCE_EXHAUSTED":
                return self.throttled_error(
                    "answered RESOURCE_EXHAUSTED (a quota or rate limit); backing off (lower "
                    "the store budget or the watch rate)"
                )
            if status == "NOT_FOUND":
                return self.remote_error(
                    "answered NOT_FOUND for the database; check the project and database "
                    "in the endpoint"
                )
            return self.remote_error(f"failed ({status}); retrying")
        if isinstance(exc, auth.RefreshError):
            return self.auth_error(
                "could not obtain a token from the metadata server; check Workload Identity "
                "is bound for this service account"
            )
        if isinstance(exc, auth.TransportError):
            return self.remote_error(
                "cannot reach the metadata server for a token; metadata-server auth works "
                "only on GKE, GCE or Cloud Run"
            )
        if isinstance(exc, api.RetryError):
            return self.remote_error("did not answer in time; check the address and retrying")
        return self.remote_error(f"failed ({type(exc).__name__})")

    # ------------------------------------------------------------------ watch
    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield each new document (or ABSENT once) the listener sees, until ``stop()``.

        The first snapshot primes and is not delivered; an identical rewrite is not
        delivered. ``interval`` paces re-opening a listener that stopped for good.
        """
        pace = Pace(max(interval, 1.0))
        last: Fetched | Absent | None = None
        while not stop():
            snapshots: queue.Queue[list[Any]] = queue.Queue()
            try:
                listener = self._document().on_snapshot(
                    lambda docs, _changes, _read_time, put=snapshots.put: put(list(docs))
                )
            except Exception as exc:
                error = self._classify(exc)
                if isinstance(error, AuthError):
                    raise error from None
                self.report(error)
                pace.failed()
                if self.pause(pace.next_wait(), stop):
                    return
                continue
            try:
                while not stop():
                    try:
                        docs = snapshots.get(timeout=_SLICE)
                    except queue.Empty:
                        if not listener.is_active:
                            break
                        continue
                    self.connected = True
                    pace.succeeded()
                    try:
                        answer = self._answer(docs[0] if docs else None)
                    except OversizeError as exc:
                        # the listener is fine; the document is not: reported, and the
                        # next snapshot within the ceiling is compared as ever
                        self.report(exc)
                        continue
                    if last is None:
                        last = answer
                    elif not same_document(answer, last):
                        last = answer
                        yield answer
            finally:
                self.connected = False
                listener.unsubscribe()
            if stop():
                return
            # The listener ended for good: one plain read says whether it was the
            # credential (raised) or the store (reported, re-opened after a pause).
            try:
                answer = self.fetch()
            except AuthError:
                raise
            except DynconfError as exc:
                self.report(exc)
                pace.failed()
            else:
                if last is not None and not same_document(answer, last):
                    yield answer
                last = answer
                self.report(self.remote_error("listener stopped; re-opening it"))
                pace.failed()
            if self.pause(pace.next_wait(), stop):
                return

    def close(self) -> None:
        """Close the client's channel; the source is not used afterwards."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # ------------------------------------------------------------------ internals
    def __repr__(self) -> str:
        return f"FirestoreSource({self.description!r})"


_NO_PROXY: Final = ("grpc.enable_http_proxy", 0)
_OWN_CONNECTION: Final = ("grpc.use_local_subchannel_pool", 1)
"""Each client's channel opens a connection of its own. gRPC otherwise shares one
connection among every channel to the same target with the same options, so a resync's
client (dynconf.follow reads apart from the watch) would ride the watch's connection, and
stall with it when that connection forwards nothing."""
_CHANNEL_OPTIONS: Final = (_NO_PROXY, _OWN_CONNECTION)


def _direct_client_class() -> Any:
    """A Firestore client whose gRPC channel ignores the environment's proxy variables.

    gRPC reads ``grpc_proxy``, ``https_proxy`` and ``http_proxy`` for every channel; the
    token rides inside TLS through such a tunnel, but a pod's environment still decides
    where the connection goes. The library builds its channel with fixed options, so this
    subclass adds ``grpc.enable_http_proxy=0`` (and a connection of the channel's own,
    :data:`_OWN_CONNECTION`) where it does: the transport's ``create_channel`` (the API) and
    the emulator's plain channel.
    """
    import grpc
    from google.cloud import firestore
    from google.cloud.firestore_v1 import base_client

    class DirectClient(firestore.Client):
        def _firestore_api_helper(self, transport: Any, client_class: Any, module: Any) -> Any:
            class DirectTransport(transport):  # type: ignore[misc]
                @classmethod
                def create_channel(cls, *args: Any, options: Any = (), **kwargs: Any) -> Any:
                    return super().create_channel(
                        *args, options=[*options, *_CHANNEL_OPTIONS], **kwargs
                    )

            return super()._firestore_api_helper(DirectTransport, client_class, module)

        def _emulator_channel(self, transport: Any) -> Any:
            options = [
                ("Authorization", "Bearer owner"),  # the library's fixed emulator bearer
                *base_client._GRPC_MSG_SIZE_OPTIONS,
                *_CHANNEL_OPTIONS,
            ]
            return grpc.insecure_channel(str(self._emulator_host), options=options)

    return DirectClient


def _direct_metadata_credentials(description: str) -> Any:
    """Workload Identity credentials whose token requests reach the metadata server directly.

    google-auth refreshes through a requests session that honours ``HTTP_PROXY``; the
    metadata server answers in plain HTTP, so a proxy named by the pod's environment would
    read the access token in the answer. Each refresh here goes through the store HTTP
    policy's session instead (no environment proxy, no redirect).
    """
    from google.auth import compute_engine
    from google.auth.transport.requests import Request

    from dynconf.errors import Origin
    from dynconf.store_http import HttpPolicy, store_session

    class DirectMetadataCredentials(compute_engine.Credentials):
        def refresh(self, request: Any) -> None:
            session = store_session(
                HttpPolicy(),
                endpoint="http://metadata.google.internal",
                subject=description,
                origin=Origin.remote(description),
            )
            with session:
                super().refresh(Request(session=session))  # type: ignore[no-untyped-call]

    return DirectMetadataCredentials()  # type: ignore[no-untyped-call]
