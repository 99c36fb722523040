"""Leader election over a ``coordination.k8s.io`` Lease: one replica reconciles at a time.

The Lease is ``dynamic-config-operator`` in the pod's namespace. A candidate creates it when
absent (``leaseTransitions: 0``), takes it over when its holder stopped renewing for a whole
term (transitions + 1, a new ``acquireTime``), and otherwise polls every ``retry`` seconds.
The leader renews every ``renew`` seconds keeping ``acquireTime``; a ``409`` on any write
means somebody else moved first. The leader's lease is *lost* when another holder appears or
no renewal succeeded within a term, and the process then ends ("the leader lease was lost")
so it can never reconcile beside a new leader. A clean stop hands the lease back (holder
cleared, 1 s term) so a follower takes over within one poll instead of a whole term.

Expiry is judged on the local monotonic clock from when this candidate last saw the record
change, as client-go does, so clock skew between nodes cannot elect two leaders.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
from urllib3.exceptions import HTTPError

__all__ = ["LEASE_NAME", "LOST_MESSAGE", "LeaderElector"]

LEASE_NAME: Final = "dynamic-config-operator"
LOST_MESSAGE: Final = "the leader lease was lost"

log = logging.getLogger("dynconf_k8s.operator.election")


@dataclass
class _Observed:
    holder: str
    renew_time: str
    duration: float
    seen_at: float


def _micro_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderElector:
    """Acquire, hold and release the Lease; ``on_lost`` runs once if leadership is lost."""

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        identity: str,
        *,
        name: str = LEASE_NAME,
        lease_seconds: float = 15.0,
        renew_seconds: float = 5.0,
        retry_seconds: float = 5.0,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.retry_seconds = retry_seconds
        self._observed: _Observed | None = None
        self._last_renewal = 0.0
        self._leading = threading.Event()

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this candidate leads (True) or ``stop`` is set (False)."""
        announced = False
        while not stop.is_set():
            if self._try_acquire_or_renew():
                self._leading.set()
                self._last_renewal = time.monotonic()
                log.info("leader_elected", extra={"identity": self.identity, "lease": self.name})
                return True
            if not announced and self._observed is not None:
                log.info("leader_waiting", extra={"holder": self._observed.holder})
                announced = True
            stop.wait(self.retry_seconds)
        return False

    def hold(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew until ``stop``; calls ``on_lost`` and returns when leadership is lost."""
        while not stop.wait(self.renew_seconds):
            if self._try_acquire_or_renew():
                self._last_renewal = time.monotonic()
                continue
            taken = self._observed is not None and self._observed.holder not in ("", self.identity)
            if taken or time.monotonic() - self._last_renewal >= self.lease_seconds:
                self._leading.clear()
                log.error(LOST_MESSAGE, extra={"identity": self.identity})
                on_lost()
                return

    def release(self) -> None:
        """Hand the lease back if we hold it, so a follower need not wait out the term."""
        if not self._leading.is_set():
            return
        self._leading.clear()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity != self.identity:
                return
            now = _micro_now()
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            lease.spec.renew_time = now
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
            log.info("leader_released", extra={"identity": self.identity})
        except (ApiException, HTTPError, OSError) as error:
            log.warning("leader_release_failed", extra={"error_type": type(error).__name__})

    # -- one round -----------------------------------------------------------------------------

    def _try_acquire_or_renew(self) -> bool:
        try:
            return self._round()
        except ApiException as error:
            if error.status != 409:
                log.warning("lease_refused", extra={"status": error.status})
            return False
        except (HTTPError, OSError) as error:
            log.warning("lease_unreachable", extra={"error_type": type(error).__name__})
            return False

    def _round(self) -> bool:
        now = _micro_now()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            self.api.create_namespaced_lease(
                self.namespace,
                client.V1Lease(
                    metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                    spec=client.V1LeaseSpec(
                        holder_identity=self.identity,
                        lease_duration_seconds=int(self.lease_seconds),
                        acquire_time=now,
                        renew_time=now,
                        lease_transitions=0,
                    ),
                ),
            )
            return True
        spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity or ""
        renewed = spec.renew_time.isoformat() if spec.renew_time else ""
        duration = float(spec.lease_duration_seconds or self.lease_seconds)
        observed = self._observed
        if observed is None or (observed.holder, observed.renew_time) != (holder, renewed):
            observed = _Observed(holder, renewed, duration, time.monotonic())
            self._observed = observed
        if holder == self.identity:
            spec.renew_time = now
            spec.lease_duration_seconds = int(self.lease_seconds)
        elif holder and time.monotonic() - observed.seen_at < observed.duration:
            return False
        else:
            spec.holder_identity = self.identity
            spec.lease_duration_seconds = int(self.lease_seconds)
            spec.acquire_time = now
            spec.renew_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        lease.spec = spec
        self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        return True
