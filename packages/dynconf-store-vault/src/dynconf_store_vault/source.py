"""The vault source: KV v2 secrets watched by version, and dynamic secrets with leases.

KV v2 (the default): the key ``<mount>/<path>`` is read at ``<mount>/data/<path>``; the
document is the secret's fields (``data.data``) as JSON, under ``section`` when one is
given; the revision is the KV version. The watch asks the cheap question each interval —
the secret's metadata ``current_version`` — and reads the data only when it moved.  A policy
that grants ``read`` on ``<mount>/data/<path>`` alone (the usual least-privilege one) refuses
the metadata; the watch then asks the data itself each interval (its ``metadata.version``),
warning once, rather than ending and leaving the file stale.

Dynamic (``spec.dynamic``): the key is read exactly as written (``database/creds/app``;
with ``?name=value`` parameters it is written instead, which is how ``pki/issue/<role>``
takes its ``common_name``). The answer's lease comes back on :class:`Fetched`; the source
renews and revokes it on request, and its ``changes`` loop renews or re-issues it on the
lease's own clock.

Every request goes through one path that takes a token from the keeper, and on Vault's 403
logs in once more and retries once; a second 403 means the policy, not the token.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

from dynconf.errors import AuthError, DynconfError, Origin, RemoteError, ThrottledError
from dynconf.limits import MAX_DOCUMENT_BYTES
from dynconf.sources import SourceSupport
from dynconf.store_http import THROTTLE_STATUSES, HttpPolicy
from dynconf.stores import (
    ABSENT,
    Absent,
    Fetched,
    Lease,
    Pace,
    StoreSpec,
    WatchCapability,
    redact_url,
    report_watching,
)
from dynconf_store_vault.auth import TokenKeeper, login_for
from dynconf_store_vault.lease import LeaseAction, LeaseSchedule, certificate_ttl
from dynconf_store_vault.transport import Answer, Transport, answer_bound

__all__ = ["DEFAULT_TIMEOUT", "VaultSource", "describe_spec", "split_key"]

DEFAULT_TIMEOUT: Final = 10.0
"""Sleeps are cut into slices this long so ``stop()`` is noticed within it."""

log = logging.getLogger("dynconf.store.vault")


def split_key(key: str) -> tuple[str, str, dict[str, str]]:
    """``<mount>/<path>[?params]`` → (mount, path, params); params only matter when dynamic."""
    bare, _, query = key.partition("?")
    bare = bare.strip("/")
    mount, _, path = bare.partition("/")
    return mount, path.strip("/"), dict(parse_qsl(query, keep_blank_values=True))


def describe_spec(spec: StoreSpec) -> str:
    """``vault <address> <key>`` (+ namespace, + dynamic); never a credential or a value."""
    key = spec.key.partition("?")[0].strip("/")
    text = f"vault {redact_url(spec.endpoint.rstrip('/'))} {key}"
    if spec.setting("namespace"):
        text += f" namespace {spec.setting('namespace')}"
    if spec.dynamic:
        text += " (dynamic)"
    return text


class VaultSource(SourceSupport):
    """A blocking Vault client for one key; see the module docstring for what it reads.

    ``on_failure``, when set, is told about every failure a watch survives by retrying
    (the agent counts them); a recovery is silent.
    """

    reports_watching = True

    failure_log = log
    failure_event = "store_failure"

    def failure_fields(self, error: DynconfError) -> dict[str, object]:
        """Vault logs its own ``store_failure`` event (kept so existing log queries match)."""
        return {
            "kind": error.kind.value,
            "store": "vault",
            "reason": error.message,
        }

    def __init__(self, spec: StoreSpec) -> None:
        self._spec = spec
        self.description = describe_spec(spec)
        self._origin = Origin.remote(self.description)
        self._mount, self._path, self._params = split_key(spec.key)
        self._dynamic = spec.dynamic
        self.capability = WatchCapability.INTERVAL if spec.dynamic else WatchCapability.CONDITIONAL
        self._transport = Transport(
            spec.endpoint,
            tls=spec.tls,
            namespace=spec.setting("namespace"),
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            origin=self._origin,
            policy=HttpPolicy.from_settings(spec.extra),
            bound=answer_bound(spec.max_bytes or MAX_DOCUMENT_BYTES),
        )
        self.keeper = TokenKeeper(
            self._transport, login_for(spec, self._origin), spec.token, self._origin
        )
        self.lease_renewals = 0
        self.lease_renewal_failures = 0
        self._schedule: LeaseSchedule | None = None
        self._mount_checked = False
        self._watch_by_data = False
        """Set once the metadata was refused and the data was not: each tick reads the data."""
        self._data_read: Fetched | Absent | None = None
        """The read behind the last data-watch tick, delivered when its version moved."""

    # -- the protocol -------------------------------------------------------------------

    def fetch(self) -> Fetched | Absent:
        """Read the document now (KV v2 latest version, or a fresh dynamic secret)."""
        if self._dynamic:
            return self._issue()
        return self._read_kv()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """KV: poll the metadata version each ``interval``; dynamic: follow the lease."""
        if self._dynamic:
            yield from self._follow_lease(interval, stop)
        else:
            yield from self._poll_versions(interval, stop)

    def close(self) -> None:
        self._transport.close()

    # -- leases ---------------------------------------------------------------------------

    @property
    def lease_schedule(self) -> LeaseSchedule | None:
        """The schedule of the lease this source last issued or renewed."""
        return self._schedule

    def renew(self, lease: Lease) -> Lease:
        """Extend ``lease``; the answer is the TTL Vault granted, which is the one to believe.

        A non-renewable lease is refused here without a request: asking can only fail.
        """
        if not lease.renewable or not lease.lease_id:
            raise RemoteError(
                "this lease is not renewable; re-issue it by fetching the path again",
                origin=self._origin,
            )
        answer = self._send("PUT", "sys/leases/renew", {"lease_id": lease.lease_id})
        if not answer.ok:
            raise RemoteError(
                f"vault did not renew the lease (status {answer.status}); it has expired, "
                "was revoked or reached its maximum TTL: re-issue it by fetching again",
                origin=self._origin,
            )
        renewed = Lease(
            lease_id=str(answer.body.get("lease_id") or lease.lease_id),
            ttl_seconds=_seconds(answer.body.get("lease_duration")),
            renewable=bool(answer.body.get("renewable")),
        )
        if renewed.ttl_seconds <= 0:
            raise RemoteError(
                "vault renewed the lease for no further time (its maximum TTL is reached); "
                "re-issue it by fetching again",
                origin=self._origin,
            )
        self._schedule = LeaseSchedule(renewed)
        return renewed

    def revoke(self, lease: Lease, deadline: float = 5.0) -> None:
        """Revoke ``lease`` now, spending at most ``deadline`` seconds on the request.

        Best effort: Vault expires the lease on its own eventually; revoking on the way out
        makes that now. Raises :class:`RemoteError` / :class:`AuthError` when it did not work.
        """
        if not lease.lease_id:
            return
        answer = self._send(
            "PUT", "sys/leases/revoke", {"lease_id": lease.lease_id}, timeout=max(deadline, 0.1)
        )
        if not answer.ok:
            raise RemoteError(
                f"vault did not revoke the lease (status {answer.status}); it expires on its "
                "own at the end of its TTL",
                origin=self._origin,
            )
        if self._schedule is not None and self._schedule.lease.lease_id == lease.lease_id:
            self._schedule = None

    # -- requests -------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Answer:
        """One request with the current token; a 403 buys exactly one fresh login and retry."""
        answer = self._transport.call(
            method, path, token=self.keeper.current(), body=body, timeout=timeout
        )
        if answer.status != 403:
            return answer
        if not self.keeper.can_relogin:
            raise _PathRefused(
                f"vault refused the supplied token on {path} (status 403): it was revoked, "
                "has expired or its policy does not grant this path; supply a token whose "
                "policy grants it",
                origin=self._origin,
            )
        self.keeper.invalidate()
        answer = self._transport.call(
            method, path, token=self.keeper.current(), body=body, timeout=timeout
        )
        if answer.status == 403:
            raise _PathRefused(
                f"vault refused {path} (status 403) even with a fresh {self.keeper.method} "
                "token: this is a policy problem, not an expired token; grant the role's "
                f"policy the needed capability on {path}",
                origin=self._origin,
            )
        return answer

    def _refusal(self, answer: Answer, path: str) -> RemoteError:
        if answer.status == 503:
            hint = "the server is sealed or in standby; unseal it or wait"
        elif answer.status == 429:
            hint = "the server is rate-limiting; the watch backs off"
        elif answer.status == 400:
            hint = "the request was refused as malformed; check the key and its parameters"
        elif answer.status == 405:
            hint = "the path does not accept this operation; check the key"
        else:
            hint = "retry later or check the server"
        message = f"vault answered {path} with status {answer.status}: {hint}"
        if answer.status in THROTTLE_STATUSES:
            return ThrottledError(message, retry_after=answer.retry_after, origin=self._origin)
        return RemoteError(message, origin=self._origin)

    # -- KV v2 ----------------------------------------------------------------------------

    def _read_kv(self) -> Fetched | Absent:
        path = f"{self._mount}/data/{self._path}"
        answer = self._send("GET", path)
        if answer.status == 404:
            self._ensure_kv_v2(path)
            return ABSENT
        if not answer.ok:
            raise self._refusal(answer, path)
        outer = answer.body.get("data")
        inner = outer.get("data") if isinstance(outer, Mapping) else None
        if not isinstance(outer, Mapping) or not isinstance(inner, Mapping):
            if isinstance(outer, Mapping) and "data" in outer and outer["data"] is None:
                return ABSENT  # a deleted latest version answers data: null
            raise RemoteError(
                f"vault answered {path} without data.data; is {self._mount}/ a KV v2 mount? "
                "(for an engine that mints secrets, set --dynamic)",
                origin=self._origin,
            )
        metadata = outer.get("metadata")
        version = metadata.get("version") if isinstance(metadata, Mapping) else None
        revision = str(version) if isinstance(version, int) else None
        return Fetched(text=self._render(inner), format="json", revision=revision)

    def _render(self, fields: Mapping[str, Any]) -> str:
        document: Mapping[str, Any] = fields
        if self._spec.section:
            document = {self._spec.section: fields}
        return json.dumps(document, ensure_ascii=False)

    def _ensure_kv_v2(self, path: str) -> None:
        """Tell a KV v1 (or non-KV) mount from a missing secret: both answer 404.

        Asked once per source, on the first 404, through the endpoint the Vault CLI uses for
        the same question; an answer that cannot be had leaves the 404 as ABSENT.
        """
        if self._mount_checked:
            return
        answer = self._transport.call(
            "GET", f"sys/internal/ui/mounts/{path}", token=self.keeper.current()
        )
        data = answer.body.get("data")
        if not answer.ok or not isinstance(data, Mapping):
            return
        self._mount_checked = True
        options = data.get("options")
        version = options.get("version") if isinstance(options, Mapping) else None
        kind = data.get("type")
        if kind == "kv" and version == "2":
            return
        what = f"KV version {version or 1}" if kind == "kv" else f"a {kind} engine"
        raise _NotKvV2(
            f"{self._mount}/ is {what}, not a KV v2 mount; point the key at a KV v2 mount, "
            "or set --dynamic for an engine that mints secrets",
            origin=self._origin,
        )

    def _version_state(self) -> int | Absent:
        """The secret's live version by its metadata; ABSENT when deleted, destroyed or gone."""
        if self._watch_by_data:
            return self._version_from_data()
        path = f"{self._mount}/metadata/{self._path}"
        try:
            answer = self._send("GET", path)
        except _PathRefused:
            # the policy may read the data but not the metadata; a token refused everywhere
            # is refused by the data read too, which raises that refusal (a failed login is
            # not a path refusal: it ends the watch as it did)
            state = self._version_from_data()
            self._watch_by_data = True
            log.warning(
                "vault_watch_reads_data",
                extra={
                    "store": self.description,
                    "detail": f"the token may not read {path}, so each watch tick reads the "
                    "secret itself; grant read on that path for the cheaper check",
                },
            )
            return state
        if answer.status == 404:
            self._ensure_kv_v2(path)
            return ABSENT
        if not answer.ok:
            raise self._refusal(answer, path)
        data = answer.body.get("data")
        current = data.get("current_version") if isinstance(data, Mapping) else None
        if not isinstance(data, Mapping) or not isinstance(current, int):
            raise _NotKvV2(
                f"vault answered {path} without current_version; {self._mount}/ is not a "
                "KV v2 mount, so it cannot be watched: use a KV v2 mount or --dynamic",
                origin=self._origin,
            )
        versions = data.get("versions")
        entry = versions.get(str(current)) if isinstance(versions, Mapping) else None
        if current == 0:
            return ABSENT
        if isinstance(entry, Mapping) and (entry.get("deletion_time") or entry.get("destroyed")):
            return ABSENT
        return current

    def _version_from_data(self) -> int | Absent:
        """The version the data read answers with (the read is kept for delivery)."""
        self._data_read = self._read_kv()
        if isinstance(self._data_read, Absent):
            return ABSENT
        return self._data_read.numeric_revision or 0

    def check(self) -> int | Absent:
        """One watch tick's question, alone (the bench times it)."""
        return self._version_state()

    def _poll_versions(
        self, interval: float, stop: Callable[[], bool]
    ) -> Iterator[Fetched | Absent]:
        pace = Pace(interval)
        seen: int | Absent | None = None
        while not stop():
            try:
                state = self._version_state()
                if seen is None:
                    seen = state  # the first observation primes and delivers nothing
                elif state != seen:
                    if isinstance(state, Absent):
                        seen = state
                        yield ABSENT
                    else:
                        answer = self._data_read if self._watch_by_data else None
                        answer = answer if answer is not None else self._read_kv()
                        # the marker comes from the read, which may be newer than the check
                        number = answer.numeric_revision if isinstance(answer, Fetched) else None
                        seen = ABSENT if isinstance(answer, Absent) else (number or state)
                        yield answer
                pace.succeeded()
                report_watching(self)
            except (AuthError, _NotKvV2):
                raise
            except DynconfError as error:
                pace.failed()
                self.report(error)
            self.pause(pace.next_wait() if pace.failures else pace.steady(), stop)

    # -- dynamic --------------------------------------------------------------------------

    def _issue(self) -> Fetched:
        path = self._mount + (f"/{self._path}" if self._path else "")
        # a minting path that takes parameters (pki/issue) is written, any other one read
        answer = self._send("PUT", path, self._params) if self._params else self._send("GET", path)
        if not answer.ok:
            raise self._refusal(answer, path)
        data = answer.body.get("data")
        if not isinstance(data, Mapping):
            raise RemoteError(
                f"vault answered {path} without data; is it a secrets engine path that mints "
                "a secret? (for a KV secret, drop --dynamic)",
                origin=self._origin,
            )
        expiration = data.get("expiration")
        ttl = certificate_ttl(
            _seconds(answer.body.get("lease_duration")),
            float(expiration) if isinstance(expiration, int | float) else None,
        )
        lease = Lease(
            lease_id=str(answer.body.get("lease_id") or ""),
            ttl_seconds=ttl,
            renewable=bool(answer.body.get("renewable")) and bool(answer.body.get("lease_id")),
        )
        self._schedule = LeaseSchedule(lease)
        return Fetched(text=self._render(data), format="json", lease=lease)

    def _follow_lease(
        self, interval: float, stop: Callable[[], bool]
    ) -> Iterator[Fetched | Absent]:
        """Renew at the schedule's moment, re-issue when renewal fails or is impossible.

        A renewal delivers nothing (the credential is unchanged); a re-issue delivers the
        new document. Retries back off but never sleep past the lease's end.
        """
        pace = Pace(interval)
        reissue = False  # set once a renewal failed: the next attempt mints a new credential
        while not stop():
            if self.pause(pace.until_next(), stop):
                return
            schedule = self._schedule
            if schedule is None:
                # prime: the caller fetches first when the starting value matters
                try:
                    self._issue()
                    pace.succeeded()
                except AuthError:
                    raise
                except DynconfError as error:
                    pace.failed()
                    self.report(error)
                    self.pause(pace.next_wait(), stop)
                continue
            if self.pause(0.0 if reissue else schedule.due_in(), stop):
                return
            if schedule.action is LeaseAction.NONE:
                continue
            try:
                if schedule.action is LeaseAction.RENEW and not reissue:
                    try:
                        self.renew(schedule.lease)
                        self.lease_renewals += 1
                        pace.succeeded()
                        continue
                    except RemoteError as error:
                        self.lease_renewal_failures += 1
                        reissue = True
                        self.report(error)
                fresh = self._issue()
                reissue = False
                pace.succeeded()
                yield fresh
            except AuthError:
                raise
            except DynconfError as error:
                pace.failed()
                reissue = True
                self.report(error)
                self.pause(schedule.bounded(pace.next_wait()), stop)


class _NotKvV2(RemoteError):
    """A watched mount that has no versions: the watch cannot work, so it ends."""


class _PathRefused(AuthError):
    """Vault's 403 on one path with a token it otherwise accepts (or cannot replace)."""


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0.0
    return float(value)
