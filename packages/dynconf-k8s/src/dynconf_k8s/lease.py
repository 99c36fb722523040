"""One leader among replicas, elected over a ``coordination.k8s.io/v1`` Lease.

Every leader dynconf runs elects through :class:`LeaderLease`: the operator (Lease
``dynamic-config-operator``, 15 s term, renewed every 5 s; losing it ends the process) and the
webhook's certificate self-rotation (Lease ``dynamic-config-webhook-rotation``, 30 s term, tried
every 15 s and again between a rotation's steps; losing it abandons the rotation). The callers
choose how often to call :meth:`LeaderLease.try_hold` and what a :attr:`Round.LOST` means to
them; the rules of the Lease itself live here, once:

- **Absent**: create it holding it, ``leaseTransitions: 0``. Creating is how the first
  candidate wins; the API server lets only one create succeed.
- **Held by this identity**: renew (a new ``renewTime``, the same ``acquireTime``).
- **Held by another, term running**: follow and try again later.
- **Released** (no holder) **or expired**: take it over with a new ``acquireTime`` and
  ``leaseTransitions`` + 1, so the count says how often leadership changed hands.

Every write is a ``replace`` carrying the ``resourceVersion`` of the object it was built from, so
the API server refuses it with ``409 Conflict`` when anyone wrote the Lease in between: a 409
always means *someone else moved first*. The leader renews onto the object its own previous write
returned rather than re-reading it, so while it leads, any write by anyone else (a takeover, a
hand edit, a delete) fails its next renewal, and it stops leading instead of guessing.

Expiry is judged on this process's monotonic clock from when it last saw the record change
(holder or ``renewTime``), as client-go does, never by comparing ``renewTime`` with the local
wall clock: clock skew between nodes then cannot make two leaders.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["LeaderLease", "Round"]

log = logging.getLogger("dynconf_k8s.lease")


class Round(enum.Enum):
    """What one :meth:`LeaderLease.try_hold` came to."""

    ACQUIRED = "acquired"
    """This candidate leads from now on: it created the Lease, took it over, or found it held
    under its own identity (a restart within the term)."""
    RENEWED = "renewed"
    """This candidate led and still does; the term starts again."""
    FOLLOWING = "following"
    """Another identity holds a running term, or beat this candidate to the write (409)."""
    FAILED = "failed"
    """The API server refused or could not be reached; nothing is known about the holder. A
    leader stays leader until a whole term passes without a successful round."""
    LOST = "lost"
    """This candidate led and no longer does: another holder appeared, another write came
    first (409) or the Lease was deleted, or no round succeeded for a whole term. Reported once;
    the candidate is a follower afterwards."""

    @property
    def leading(self) -> bool:
        """True when the candidate leads after this round."""
        return self in (Round.ACQUIRED, Round.RENEWED)


@dataclass(frozen=True)
class _Observed:
    """The record as last seen changing, and when (monotonic), to time its term locally."""

    holder: str
    renew_time: str
    term: float
    seen_at: float


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderLease:
    """One candidate's view of a Lease: acquire, renew, take over an expired term, release.

    ``identity`` must differ between candidates (the pod name); ``term`` is the
    ``leaseDurationSeconds`` this candidate writes (whole seconds). Not thread-safe: one thread
    runs the rounds. ``clock`` is the monotonic clock expiry is judged on (tests pass their own).
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        identity: str,
        *,
        term: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.term = term
        self._clock = clock
        self._observed: _Observed | None = None
        self._held: Any = None
        """The Lease our last write returned, while we lead; the next renewal is built on it."""
        self._leading = False
        self._last_success = 0.0

    @property
    def leading(self) -> bool:
        """True between a leading round and the round that reports :attr:`Round.LOST`."""
        return self._leading

    @property
    def holder(self) -> str:
        """The holder identity last seen on the Lease ("" when none was, or it was released)."""
        return self._observed.holder if self._observed is not None else ""

    def try_hold(self, api_client: Any) -> Round:
        """One round: renew when leading, else acquire, take over or follow."""
        from kubernetes import client  # type: ignore[import-untyped]
        from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
        from urllib3.exceptions import HTTPError

        api = client.CoordinationV1Api(api_client)
        try:
            if self._held is not None:
                return self._renew(api)
            return self._acquire(api, client)
        except ApiException as error:
            if self._held is not None and error.status in (404, 409):
                return self._lose("another write came first")
            if error.status == 409:
                return Round.FOLLOWING
            log.warning("lease_refused", extra={"lease": self.name, "status": error.status})
        except (HTTPError, OSError) as error:
            log.warning(
                "lease_unreachable",
                extra={"lease": self.name, "error_type": type(error).__name__},
            )
        if self._leading and self._clock() - self._last_success >= self.term:
            return self._lose("no renewal succeeded for a whole term")
        return Round.FAILED

    def release(self, api_client: Any) -> bool:
        """Hand the Lease back (no holder, 1 s term) so a follower need not wait out the term.

        Only when this candidate leads and the Lease still names it; True when handed back.
        Failures are logged, not raised: the term running out releases it just the same.
        """
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        if not self._leading:
            return False
        self._leading, self._held = False, None
        api = client.CoordinationV1Api(api_client)
        try:
            lease = api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return False
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            lease.spec.renew_time = _now()
            api.replace_namespaced_lease(self.name, self.namespace, lease)
        except (ApiException, HTTPError, OSError) as error:
            log.warning(
                "lease_release_failed",
                extra={"lease": self.name, "error_type": type(error).__name__},
            )
            return False
        return True

    # -- the two kinds of round -------------------------------------------------------------------

    def _renew(self, api: Any) -> Round:
        lease = self._held
        lease.spec.renew_time = _now()
        lease.spec.lease_duration_seconds = int(self.term)
        self._won(api.replace_namespaced_lease(self.name, self.namespace, lease))
        return Round.RENEWED

    def _acquire(self, api: Any, client: Any) -> Round:
        from kubernetes.client.rest import ApiException

        now = _now()
        try:
            lease = api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            created = api.create_namespaced_lease(
                self.namespace,
                client.V1Lease(
                    metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                    spec=client.V1LeaseSpec(
                        holder_identity=self.identity,
                        lease_duration_seconds=int(self.term),
                        acquire_time=now,
                        renew_time=now,
                        lease_transitions=0,
                    ),
                ),
            )
            self._won(created)
            return Round.ACQUIRED
        spec = lease.spec or client.V1LeaseSpec()
        observed = self._observe(spec)
        if observed.holder != self.identity:
            if observed.holder and self._clock() - observed.seen_at < observed.term:
                return Round.FOLLOWING
            spec.holder_identity = self.identity
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.lease_duration_seconds = int(self.term)
        spec.renew_time = now
        lease.spec = spec
        self._won(api.replace_namespaced_lease(self.name, self.namespace, lease))
        return Round.ACQUIRED

    def _observe(self, spec: Any) -> _Observed:
        holder = spec.holder_identity or ""
        renewed = spec.renew_time.isoformat() if spec.renew_time else ""
        seen = self._observed
        if seen is None or (seen.holder, seen.renew_time) != (holder, renewed):
            term = float(spec.lease_duration_seconds or self.term)
            seen = _Observed(holder, renewed, term, self._clock())
            self._observed = seen
        return seen

    def _won(self, lease: Any) -> None:
        self._held = lease
        self._leading = True
        self._last_success = self._clock()
        self._observe(lease.spec)

    def _lose(self, why: str) -> Round:
        self._leading, self._held = False, None
        log.warning("lease_lost", extra={"lease": self.name, "identity": self.identity, "why": why})
        return Round.LOST
