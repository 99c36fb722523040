"""The agent's state as the fleet sees it: 27 ``dynamic_config_agent_*`` series and readiness.

:class:`AgentState` is the one place the watch loop records what happened (counters, gauges,
the published fingerprint, the last acknowledgement); the metrics port reads it. The series
come out in the contract's order through a prometheus-client collector, followed by the shared
reconcile histogram and ``reconcile_failures_total`` (always zero here; the operator counts
it), then our own ``store_requests_total`` (:class:`dynconf.metrics.StoreRequestsCollector`).
Gauges that are a function of time — ``staleness_seconds``, ``unapplied_seconds``,
``applied`` — are computed at scrape, so a stalled loop cannot freeze them.

Nothing here imports prometheus-client: the init agent renders once and exits without a
metrics port, and the client's exposition stack (``http.server``, ``wsgiref``, ``email``) is a
third of its start-up. The reconcile histogram is counted here (:class:`ReconcileHistogram`)
and the registry is built in :mod:`dynconf_k8s.agent.exposition` on the first scrape.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["PREFIX", "SERIES", "AgentState", "AgentMetrics", "ReconcileHistogram"]

PREFIX: Final = "dynamic_config_agent"
RECONCILE_BUCKETS: Final = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0)

SERIES: Final = (
    ("renders_total", "counter", "Documents published."),
    ("render_failures_total", "counter", "Fetches, renders or writes that failed."),
    ("last_render_timestamp_seconds", "gauge", "Unix time of the last publish."),
    ("deliveries_total", "counter", "Documents the store's watch delivered."),
    ("resyncs_total", "counter", "Resync reads of a push store."),
    ("watch_connected", "gauge", "1 while the store watch is open."),
    ("watch_reconnects_total", "counter", "Watch failures survived by reopening."),
    ("staleness_seconds", "gauge", "Seconds since the store was last read successfully."),
    ("lease_renewals_total", "counter", "Lease renewals that succeeded."),
    ("lease_renewal_failures_total", "counter", "Lease renewals that failed."),
    ("lease_revocations_total", "counter", "Leases revoked on shutdown."),
    ("lease_ttl_seconds", "gauge", "TTL the store last granted."),
    ("generation", "gauge", "The store's numeric revision of what was last rendered."),
    ("notifications_total", "counter", "Post-publish notifications that landed."),
    ("notification_failures_total", "counter", "Post-publish notifications refused or lost."),
    ("drift", "gauge", "1 while a rendered file is not what this agent wrote."),
    ("drift_total", "counter", "Drifts detected."),
    ("canary_holding", "gauge", "1 while a fetched document is held outside the cohort."),
    ("canary_percent", "gauge", "The cohort percentage last read (100 without a canary)."),
    ("acks_total", "counter", "Acknowledgements received on POST /applied."),
    ("ack_mismatches_total", "counter", "Acknowledgements of another document."),
    ("applied", "gauge", "1 while the application acknowledged the published document."),
    ("unapplied_seconds", "gauge", "Seconds the published document has gone unacknowledged."),
    ("tls_reloads_total", "counter", "Store clients rebuilt for rotated trust material."),
    ("tls_verification_skipped", "gauge", "1 when the store's certificate is not verified."),
    ("absent", "gauge", "1 while the store answers that the document is gone."),
    ("absent_total", "counter", "Times the document went missing."),
)
"""Name (after the prefix), type and help of each series, in the contract's order."""


@dataclass
class AgentState:
    """What the loop knows; every field is written by the loop and read by the port."""

    renders_total: int = 0
    render_failures_total: int = 0
    last_render_timestamp_seconds: float = 0.0
    deliveries_total: int = 0
    resyncs_total: int = 0
    watch_reconnects_total: int = 0
    lease_renewals_total: int = 0
    lease_renewal_failures_total: int = 0
    lease_revocations_total: int = 0
    lease_ttl_seconds: float = 0.0
    generation: int = 0
    notifications_total: int = 0
    notification_failures_total: int = 0
    drift: int = 0
    drift_total: int = 0
    canary_holding: int = 0
    canary_percent: int = 100
    acks_total: int = 0
    ack_mismatches_total: int = 0
    tls_reloads_total: int = 0
    tls_verification_skipped: int = 0
    absent: int = 0
    absent_total: int = 0
    published_fingerprint: str = ""
    last_ack: str = ""
    last_success: float | None = None
    """Monotonic time of the last successful read (first fetch, delivery, resync)."""
    last_render_monotonic: float | None = None
    max_staleness: float | None = None
    require_ack: bool = False
    connected: Callable[[], bool] = field(default=lambda: False)
    refresh: Callable[[], None] | None = None
    """Called before each scrape (the loop mirrors a source's lease counters through it)."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bump(self, name: str, by: int = 1) -> None:
        """Add to a counter; safe from a store's worker thread."""
        with self.lock:
            setattr(self, name, getattr(self, name) + by)

    def read_succeeded(self) -> None:
        self.last_success = time.monotonic()

    def staleness(self) -> float:
        if self.last_success is None:
            return 0.0
        return max(0.0, time.monotonic() - self.last_success)

    def applied(self) -> bool:
        return bool(self.published_fingerprint) and self.published_fingerprint == self.last_ack

    def unapplied_seconds(self) -> float:
        if self.last_render_monotonic is None or self.applied():
            return 0.0
        return max(0.0, time.monotonic() - self.last_render_monotonic)

    def acknowledge(self, fingerprint: str) -> bool:
        """Record an application's ack; True when it names the published document."""
        with self.lock:
            self.acks_total += 1
            self.last_ack = fingerprint
            current = bool(self.published_fingerprint) and fingerprint == self.published_fingerprint
            if not current:
                self.ack_mismatches_total += 1
            return current

    def ready(self) -> bool:
        """At least one render, fresh enough, and acknowledged when that is required."""
        if self.renders_total < 1:
            return False
        if self.max_staleness is not None and self.staleness() > self.max_staleness:
            return False
        return not self.require_ack or self.applied()

    def value(self, name: str) -> float:
        if name == "watch_connected":
            return 1.0 if self.connected() else 0.0
        if name == "staleness_seconds":
            return float(int(self.staleness()))
        if name == "applied":
            return 1.0 if self.applied() else 0.0
        if name == "unapplied_seconds":
            return float(int(self.unapplied_seconds()))
        return float(getattr(self, name))


class ReconcileHistogram:
    """``reconcile_duration_seconds`` as prometheus-client's histogram counts it: an
    observation lands in the first bucket whose bound it does not exceed (``+Inf`` last);
    the exposition sums the buckets up. Safe from any thread."""

    def __init__(self, bounds: tuple[float, ...] = RECONCILE_BUCKETS) -> None:
        self.bounds: Final = (*bounds, float("inf"))
        self._counts = [0] * len(self.bounds)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            self._sum += seconds
            for index, bound in enumerate(self.bounds):
                if seconds <= bound:
                    self._counts[index] += 1
                    break

    def snapshot(self) -> tuple[list[tuple[float, int]], float]:
        """The cumulative count at each bound, and the sum of all observations."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for bound, count in zip(self.bounds, counts, strict=True):
            running += count
            cumulative.append((bound, running))
        return cumulative, total


class AgentMetrics:
    """The registry the metrics port serves: the state collector, then the reconcile pair.

    The registry is built on first use (the sidecar's first scrape), so an init agent never
    imports prometheus-client; the counts it serves were kept from the start.
    """

    def __init__(self, state: AgentState) -> None:
        self.state = state
        self.reconcile = ReconcileHistogram()
        self._registry: CollectorRegistry | None = None
        self._lock = threading.Lock()

    @property
    def registry(self) -> CollectorRegistry:
        with self._lock:
            if self._registry is None:
                from dynconf_k8s.agent.exposition import build_registry

                self._registry = build_registry(self)
            return self._registry

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
