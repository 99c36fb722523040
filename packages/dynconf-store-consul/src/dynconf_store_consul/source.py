"""The Consul KV source: one key read as one document, watched with blocking queries.

``fetch`` is ``GET /v1/kv/<key>``: the single entry's base64 value decoded as UTF-8 text,
the format named by the key's extension (or the spec), and ``X-Consul-Index`` as the
revision. A 404 is :data:`ABSENT` (the key is gone, not an error).

``changes`` is the push watch: the same read as a blocking query (``?index=<last>&wait=``)
that Consul holds open until the key's index moves or the wait ends. The first answer primes
the index and is not delivered; afterwards a new text (or ABSENT once) is yielded, an
identical rewrite (Consul bumps the index on a no-op write) is not. An index that goes
backwards (a restored snapshot, a rebuilt cluster) resets it to 0 so the next query answers
at once. A failed query is reported and retried after a fixed 5 s, as the reference store
does; a refused credential is raised after the one re-login a login method allows. Queries
start at least :data:`~dynconf.stores.WATCH_FLOOR` apart, so an agent that answers a blocking
query at once with an unmoved index is asked at most twice a second, not hundreds of times.

Every answer is read within the bound the document ceiling sets
(:func:`~dynconf_store_consul.transport.answer_bound`): a value past it is refused with the
engine's :class:`~dynconf.errors.OversizeError` before it is held whole; the watch reports
it and asks again after the retry pause.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from dynconf.errors import AuthError, DynconfError, Origin, OversizeError, RemoteError
from dynconf.sources import SourceSupport
from dynconf.store_http import THROTTLE_STATUSES, retry_after
from dynconf.stores import ABSENT, Absent, Fetched, Pace, layered, report_watching, same_document
from dynconf_store_consul.auth import Credential
from dynconf_store_consul.plugin import ConsulStoreType
from dynconf_store_consul.transport import Reply, Transport

__all__ = ["DEFAULT_WAIT", "MAX_WAIT", "RETRY_WAIT", "ConsulSource", "FailureSink"]

DEFAULT_WAIT: Final = 60.0
"""Seconds Consul may hold one blocking query; also the watch's worst-case stop latency."""
MAX_WAIT: Final = 600.0
"""Consul's own ceiling for ``wait``; longer values are clamped to it."""
RETRY_WAIT: Final = 5.0
"""The fixed pause after a failed blocking query before the next one."""

FailureSink = Callable[[DynconfError], None]
"""Receives each failure a watch survives by retrying (the agent counts and logs them)."""

log = logging.getLogger("dynconf.store.consul")


class ConsulSource(SourceSupport):
    """A blocking :class:`~dynconf.stores.RemoteSource` over one Consul KV key."""

    reports_watching = True

    capability = ConsulStoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "consul watch query failed; retrying"

    def __init__(
        self,
        transport: Transport,
        key: str,
        format_name: str,
        credential: Credential,
        *,
        description: str,
        datacenter: str | None = None,
        wait: float = DEFAULT_WAIT,
        retry_wait: float = RETRY_WAIT,
        on_failure: FailureSink | None = None,
        keys: Sequence[tuple[str, str]] = (),
    ) -> None:
        """``keys``: (key, format) pairs read in one transaction as one layered document
        (later keys win); empty: the one ``key``."""
        self._transport = transport
        self._key = key
        self._path = f"/v1/kv/{key}"
        self._format = format_name
        self._credential = credential
        self.description = description
        self._datacenter = datacenter
        self._wait = min(max(wait, 1.0), MAX_WAIT)
        self._retry_wait = retry_wait
        self.on_failure = on_failure
        self.connected = False
        """True while the watch's last query succeeded (the agent's ``watch_connected``)."""
        self._closed = False
        self._keys = tuple(keys)

    @property
    def credential(self) -> Credential:
        return self._credential

    def fetch(self) -> Fetched | Absent:
        """Read the key now: its document, or ABSENT when Consul has no such key."""
        answer, _index = self._read(None)
        return answer

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield each new document (or ABSENT) as blocking queries observe it, until ``stop()``.

        ``interval`` is not used: the query itself waits for the change, and the agent's
        resync (a plain fetch each interval) covers a stream that fell silent. ``stop`` is
        checked between queries, so stopping takes up to the blocking wait; :meth:`close`
        ends the query in flight, and the watch with it, at once.
        """

        def ended() -> bool:
            return self._closed or stop()

        index: int | None = None
        last: Fetched | Absent | None = None
        pace = Pace(self._retry_wait)
        fresh = True  # the previous answer brought news: the next query goes at once
        while not ended():
            if self.pause(pace.until_next(fresh=fresh), ended):
                return
            fresh = False
            try:
                answer, new_index = self._read(index)
            except AuthError:
                self.connected = False
                raise
            except OversizeError as exc:
                # the agent answered; its value is past the ceiling (refused within the
                # bound): reported, and asked again after the retry pause, not at once
                self.report(exc)
                if self.pause(self._retry_wait, ended):
                    return
                continue
            except DynconfError as exc:
                if self._closed:
                    return  # close() ended the query in flight: not a failure of the store
                self.connected = False
                self.report(exc)
                if self.pause(self._retry_wait, ended):
                    return
                continue
            # news is a forward index that brought another document; the same index (a
            # store answering at once), one that went backwards, or a move for some other
            # key keeps the next query a floor after this one
            moved = new_index is not None and index is not None and new_index > index
            if index is not None and new_index is not None and new_index < index:
                # Consul's documented rule: an index that goes backwards means the state
                # was rebuilt; start over with a query that answers at once.
                new_index = 0
            if new_index is not None:
                index = new_index
            elif index is None:
                index = 0
            self.connected = True
            report_watching(self)  # one blocking query answered: the call is counted
            if last is None:
                # the prime is not news: the first blocking query waits the floor, so the
                # follower's catch-up read reuses this idle connection instead of opening a
                # second one (a change meanwhile is answered at once by that query)
                last = answer
                continue
            if not same_document(answer, last):
                last, fresh = answer, moved
                yield answer

    def close(self) -> None:
        """Log out a login-minted token and release the connection pool."""
        if self._closed:
            return
        self._closed = True
        try:
            self._credential.close(self._transport)
        finally:
            self._transport.close()

    # ------------------------------------------------------------------ internals
    def _read(self, index: int | None) -> tuple[Fetched | Absent, int | None]:
        if self._keys:
            return self._read_keys(index)
        params: list[tuple[str, str]] = []
        if self._datacenter:
            params.append(("dc", self._datacenter))
        if index is not None:
            params.extend([("index", str(index)), ("wait", f"{self._wait:g}s")])
        reply = self._authorised(params)
        new_index = reply.header_int("X-Consul-Index")
        if reply.code == 404:
            return ABSENT, new_index
        if reply.code != 200:
            raise self._failed(reply)
        text, modify_index = self._decode(reply.body)
        revision = new_index if new_index is not None else modify_index
        return Fetched(
            text=text,
            format=self._format,
            revision=None if revision is None else str(revision),
        ), new_index

    def _read_keys(self, index: int | None) -> tuple[Fetched | Absent, int | None]:
        """Several keys at one instant: a blocking listing of their common prefix waits
        for a change, then one read-only transaction reads every key at one index.

        The listing's index is taken *before* the transaction, so a write between the two
        makes the next blocking query answer at once: no change is lost.
        """
        dc = [("dc", self._datacenter)] if self._datacenter else []
        params = [*dc, ("keys", "")]
        if index is not None:
            params.extend([("index", str(index)), ("wait", f"{self._wait:g}s")])
        # consul prefixes are character prefixes, which is what commonprefix computes
        prefix = os.path.commonprefix([key for key, _ in self._keys])  # noqa: RUF071
        listing = self._authorised(params, path=f"/v1/kv/{prefix}")
        if listing.code not in (200, 404):
            raise self._failed(listing)
        new_index = listing.header_int("X-Consul-Index")
        operations = [{"KV": {"Verb": "get-tree", "Key": key}} for key, _ in self._keys]
        reply = self._authorised(dc, path="/v1/txn", method="PUT", body=json.dumps(operations))
        if reply.code != 200:
            raise self._failed(reply, "the read transaction")
        try:
            results = json.loads(reply.body).get("Results") or []
        except (ValueError, AttributeError):
            raise self.remote_error(
                "answered the transaction with a body that is not JSON"
            ) from None
        entries = {
            r["KV"].get("Key"): r["KV"]
            for r in results
            if isinstance(r, dict) and isinstance(r.get("KV"), dict)
        }
        answers: list[Fetched | Absent] = []
        for key, format_name in self._keys:
            entry = entries.get(key)
            if entry is None or entry.get("Value") is None:
                answers.append(ABSENT)
                continue
            answers.append(Fetched(self._value_text(entry["Value"]), format_name))
        revision = reply.header_int("X-Consul-Index") or new_index
        document = layered(
            answers,
            revision=None if revision is None else str(revision),
            origin=Origin.remote(self.description),
        )
        return document, new_index

    def _value_text(self, value: object) -> str:
        try:
            return base64.b64decode(value, validate=True).decode("utf-8")  # type: ignore[arg-type]
        except (binascii.Error, ValueError, TypeError):
            raise self.remote_error(
                "holds a value that is not UTF-8 text; store the document as UTF-8"
            ) from None

    def _authorised(
        self,
        params: list[tuple[str, str]],
        *,
        path: str | None = None,
        method: str = "GET",
        body: str | None = None,
    ) -> Reply:
        """One request, plus exactly one fresh login when a login token is refused."""
        target = self._path if path is None else path
        reply = self._transport.call(
            method, target, params=params, body=body, token=self._credential.token(self._transport)
        )
        if reply.code != 403:
            return reply
        if self._credential.renewable:
            self._credential.invalidate()
            reply = self._transport.call(
                method,
                target,
                params=params,
                body=body,
                token=self._credential.token(self._transport),
            )
            if reply.code != 403:
                return reply
            raise self.auth_error(
                "refused a freshly logged-in token (403) twice; grant the auth method's role "
                f"or policy `key_prefix` read on {self._key}"
            )
        if self._credential.token(self._transport) is None:
            raise self.auth_error(
                "refused an anonymous read (403): ACLs are enforced; supply a token "
                "(--auth token) or log in (--auth kubernetes / jwt with --auth-mount)"
            )
        raise self.auth_error(
            "refused the ACL token (403); grant its policy read on the key, or replace the "
            "token (a supplied token is not retried)"
        )

    def _decode(self, body: str) -> tuple[str, int | None]:
        try:
            entries = json.loads(body)
        except ValueError:
            raise self.remote_error("answered with a body that is not a KV listing") from None
        entry = None
        if isinstance(entries, list):
            entry = next(
                (e for e in entries if isinstance(e, dict) and e.get("Key") == self._key), None
            )
        if entry is None:
            raise self.remote_error(
                "answered without the requested key; is a proxy rewriting paths?"
            )
        value = entry.get("Value")
        if value is None:
            raise self.remote_error("holds no value; write the document to the key")
        text = self._value_text(value)
        modify = entry.get("ModifyIndex")
        return text, modify if isinstance(modify, int) else None

    def _failed(self, reply: Reply, what: str = "") -> RemoteError:
        """The error for a non-2xx answer: throttled for 429 / 503 (with its Retry-After)."""
        said = f"answered {what} with {reply.code}" if what else f"answered {reply.code}"
        message = f"{said}; {_status_hint(reply.code)}"
        if reply.code in THROTTLE_STATUSES:
            return self.throttled_error(message, retry_after(reply.headers.get("Retry-After")))
        return self.remote_error(message)

    def __repr__(self) -> str:
        return f"ConsulSource({self.description!r})"


def _status_hint(code: int) -> str:
    if code == 401:
        return "Consul answers 403 to a refused token, so a proxy in front of it refused this"
    if code == 429:
        return "the agent is rate-limiting; retrying"
    if code == 400:
        return "check the key and the datacenter"
    if code >= 500:
        return "the agent or its servers are failing (an unknown datacenter answers 500); retrying"
    return "retrying"
