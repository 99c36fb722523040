"""The NATS JetStream KV source: one key of an existing bucket, watched by a KV watcher.

``fetch`` is ``kv.get(key)``: the value decoded as UTF-8, the format named by the key's
extension (or the spec), and the entry's KV revision (the stream sequence) as the
revision. A key never written, deleted or purged is :data:`ABSENT`. A bucket that does not
exist is refused with the command that creates it — the store never creates one.

``changes`` is the push watch: a KV watcher on the key (an ordered JetStream consumer that
starts at the key's last entry). The watcher's opening entry primes the revision and is not
delivered. Afterwards a put yields the document with its revision; a delete or purge yields
:data:`ABSENT` once. When the connection dies (the server restarted, the network dropped)
the failure is reported, the source connects again with :class:`~dynconf.stores.Pace`
backoff and reopens the watcher; if the key's revision moved while the stream was down, the
reopened watcher's opening entry is delivered, so a change made during the outage is not
lost. A refused credential or a missing bucket ends the watch with the error.

A value is measured against the document ceiling (:attr:`~dynconf.stores.StoreSpec.max_bytes`)
before it is decoded: one past it is refused with the engine's
:class:`~dynconf.errors.OversizeError`. The read itself is bounded by the server: a message
never exceeds its ``max_payload`` (1 MiB by default, 64 MiB at most), which nats-py holds
whole before the source sees it; the watch reports a value past the ceiling and goes on.

All NATS work runs on the source's :class:`~dynconf_store_nats.connection.HomeLoop`; see
that module for why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from dynconf.errors import (
    AuthError,
    BackendError,
    DynconfError,
    Origin,
    OversizeError,
    RemoteError,
)
from dynconf.render import DEFAULT_MAX_DOCUMENT_BYTES, check_byte_count
from dynconf.sources import SourceSupport
from dynconf.stores import ABSENT, Absent, Fetched, Pace
from dynconf_store_nats.connection import ConnectSettings, HomeLoop, classify, connect
from dynconf_store_nats.plugin import NatsStoreType

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.kv import KeyValue

__all__ = ["RECONNECT_BASE", "RECONNECT_CEILING", "FailureSink", "NatsSource", "NoSuchBucket"]

RECONNECT_BASE: Final = 0.5
"""Reconnect backoff base in seconds: waits of ~1, 2, 4 … s after consecutive failures."""
RECONNECT_CEILING: Final = 30.0
_SLICE: Final = 0.5
"""How often a quiet watcher checks that its connection is still open."""

FailureSink = Callable[[DynconfError], None]
"""Receives each failure the watch survives by reconnecting (the agent counts and logs them)."""

log = logging.getLogger("dynconf.store.nats")


class NoSuchBucket(RemoteError):
    """The bucket does not exist; waiting will not create it, so the watch ends."""


@dataclass
class _Cursor:
    """What the watch last saw: the key's KV revision and whether it was absent."""

    primed: bool = False
    revision: int = 0
    absent: bool = False


class NatsSource(SourceSupport):
    """An :class:`~dynconf.stores.AsyncRemoteSource` over one key of a JetStream KV bucket."""

    capability = NatsStoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "nats watch failed; reconnecting"

    def __init__(
        self,
        settings: ConnectSettings,
        bucket: str,
        key: str,
        format_name: str,
        *,
        on_failure: FailureSink | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """``max_bytes``: the document ceiling (the engine's 8 MiB when ``None``)."""
        self._settings = settings
        self._max_bytes = max_bytes or DEFAULT_MAX_DOCUMENT_BYTES
        self._bucket = bucket
        self._key = key
        self._format = format_name
        self.description = settings.description
        self._home = HomeLoop("dynconf-nats")
        self._client: Client | None = None
        self._kv: KeyValue | None = None
        self._lock: asyncio.Lock | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._closed = False
        self.on_failure = on_failure
        self.connected = False
        """True while the watch's stream is open (the agent's ``watch_connected``)."""
        self.reconnect_base = RECONNECT_BASE
        self.connects = 0
        """How many connections the source opened (each one re-reads the credential files)."""

    async def fetch(self) -> Fetched | Absent:
        """Read the key now: its document, or ABSENT when the bucket holds no value for it."""
        self._check_open()
        return await self._home.run(self._fetch())

    async def changes(self, interval: float) -> AsyncIterator[Fetched | Absent]:
        """Yield each new document (or ABSENT) as the KV watcher pushes it.

        ``interval`` is not used: the server pushes, and the engine's resync covers a
        stream that fell silent. Cancelling the consuming task (or closing the generator)
        stops the watcher at once.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Fetched | Absent | DynconfError] = asyncio.Queue()

        def hand(item: Fetched | Absent | DynconfError) -> None:
            with contextlib.suppress(RuntimeError):  # the consuming loop has ended
                loop.call_soon_threadsafe(inbox.put_nowait, item)

        pump = self._home.submit(self._pump(hand))
        try:
            while True:
                item = await inbox.get()
                if isinstance(item, DynconfError):
                    raise item
                yield item
        finally:
            pump.cancel()

    async def aclose(self) -> None:
        """Close the connection and stop the home loop; the source is not used afterwards."""
        if self._closed:
            return
        self._closed = True
        if not self._home.running:
            return
        try:
            await self._home.run(self._shutdown())
        finally:
            self._home.stop()

    # ---------------------------------------------------------------- home-loop work
    async def _fetch(self) -> Fetched | Absent:
        import nats.js.errors

        kv = await self._bucket_handle()
        try:
            entry = await asyncio.wait_for(kv.get(self._key), self._settings.timeout)
        except nats.js.errors.KeyNotFoundError:  # never written, deleted or purged
            return ABSENT
        except Exception as exc:
            raise classify(exc, self.description, "reading the key") from None
        return self._document(entry.value, entry.revision)

    async def _bucket_handle(self) -> KeyValue:
        """The bucket on an open connection, connecting (again) when there is none."""
        import nats.errors
        import nats.js.errors

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._kv is not None and self._client is not None and not self._client.is_closed:
                return self._kv
            await self._drop()
            client = await connect(self._settings)
            self.connects += 1
            try:
                js = client.jetstream(timeout=self._settings.timeout)
                kv = await js.key_value(self._bucket)
            except nats.js.errors.BucketNotFoundError:
                await client.close()
                raise NoSuchBucket(
                    f"{self.description}: the bucket {self._bucket} does not exist; create it "
                    f"(nats kv add {self._bucket}) — the store never creates buckets",
                    origin=Origin.remote(self.description),
                ) from None
            except nats.errors.NoRespondersError:
                await client.close()
                raise RemoteError(
                    f"{self.description}: JetStream is not enabled on the server (no "
                    "responder for its API); start nats-server with -js",
                    origin=Origin.remote(self.description),
                ) from None
            except Exception as exc:
                await client.close()
                raise classify(exc, self.description, "opening the bucket") from None
            self._client, self._kv = client, kv
            return kv

    async def _shutdown(self) -> None:
        """Stop every watch (their watchers unsubscribe), then close the connection."""
        pumps = list(self._pumps)
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
        await self._drop()

    async def _drop(self) -> None:
        client, self._client, self._kv = self._client, None, None
        if client is not None and not client.is_closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), self._settings.timeout)

    async def _pump(self, hand: Callable[[Fetched | Absent | DynconfError], None]) -> None:
        """Open the watcher, follow it, and reopen it after a lost connection."""
        pace = Pace(self.reconnect_base, ceiling=RECONNECT_CEILING)
        cursor = _Cursor()
        task = asyncio.current_task()
        if task is not None:
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)
        try:
            while True:
                watcher: Any = None
                try:
                    kv = await self._bucket_handle()
                    client = self._client
                    assert client is not None
                    watcher = await asyncio.wait_for(kv.watch(self._key), self._settings.timeout)
                    await self._follow(watcher, client, cursor, pace, hand)
                except (AuthError, NoSuchBucket) as exc:
                    self.connected = False
                    hand(exc)
                    return
                except Exception as exc:
                    error = classify(exc, self.description, "watching the key")
                    if isinstance(error, AuthError):
                        self.connected = False
                        hand(error)
                        return
                    self.connected = False
                    self.report(error)
                    pace.failed()
                    await asyncio.sleep(pace.next_wait())
                finally:
                    if watcher is not None:
                        with contextlib.suppress(Exception):
                            await asyncio.wait_for(watcher.stop(), 1.0)
        except asyncio.CancelledError:
            self.connected = False
            raise

    async def _follow(
        self,
        watcher: Any,
        client: Client,
        cursor: _Cursor,
        pace: Pace,
        hand: Callable[[Fetched | Absent | DynconfError], None],
    ) -> None:
        """Read one watcher until its connection closes (raises a RemoteError then)."""
        import nats.errors

        opening: tuple[int, Fetched | Absent] | None = None
        settled = False
        while True:
            try:
                entry = await watcher.updates(timeout=_SLICE)
            except nats.errors.TimeoutError:
                if client.is_closed:
                    raise self.remote_error("lost its connection; reconnecting") from None
                continue
            if entry is None:  # nats-py's marker: the opening state has been sent
                if not settled:
                    settled = True
                    self.connected = True
                    pace.succeeded()
                    self._settle(opening or (0, ABSENT), cursor, hand)
                continue
            try:
                answer = self._answer(entry)
            except (RemoteError, OversizeError) as exc:
                self.report(exc)
                cursor.revision = max(cursor.revision, entry.revision)
                continue
            if not settled:
                opening = (entry.revision, answer)
                continue
            if entry.revision <= cursor.revision:
                continue  # replayed after the ordered consumer was reset
            cursor.revision = entry.revision
            if isinstance(answer, Absent):
                if cursor.absent:
                    continue
                cursor.absent = True
            else:
                cursor.absent = False
            hand(answer)

    @staticmethod
    def _settle(
        opening: tuple[int, Fetched | Absent],
        cursor: _Cursor,
        hand: Callable[[Fetched | Absent | DynconfError], None],
    ) -> None:
        """Prime on the first opening state; after a reconnect, deliver what moved meanwhile."""
        revision, answer = opening
        absent = isinstance(answer, Absent)
        moved = cursor.primed and revision != cursor.revision
        if moved and not (absent and cursor.absent):
            hand(answer)
        cursor.primed, cursor.revision, cursor.absent = True, revision, absent

    def _answer(self, entry: Any) -> Fetched | Absent:
        from nats.js.kv import KV_DEL, KV_PURGE

        if entry.operation in (KV_DEL, KV_PURGE):
            return ABSENT
        return self._document(entry.value, entry.revision)

    def _document(self, value: bytes | None, revision: int | None) -> Fetched:
        check_byte_count(len(value or b""), self._max_bytes)
        try:
            text = (value or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise self.remote_error(
                "holds a value that is not UTF-8 text; store the document as UTF-8"
            ) from None
        return Fetched(
            text=text,
            format=self._format,
            revision=None if revision is None else str(revision),
        )

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError(
                f"{self.description}: the source was closed; build a new one",
                origin=Origin.remote(self.description),
            )

    def __repr__(self) -> str:
        return f"NatsSource({self.description!r})"
