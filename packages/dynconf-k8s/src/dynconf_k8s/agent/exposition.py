"""The agent's ``/metrics`` registry, in prometheus-client's terms.

Imported by :attr:`dynconf_k8s.agent.metrics.AgentMetrics.registry` on the first scrape and
never on an init agent's path: the state it reads is kept in :mod:`~dynconf_k8s.agent.metrics`
without the client.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from dynconf.metrics import StoreRequestsCollector
from dynconf_k8s.agent.metrics import PREFIX, SERIES, AgentState, ReconcileHistogram

if TYPE_CHECKING:
    from dynconf_k8s.agent.metrics import AgentMetrics

__all__ = ["build_registry"]


class _StateCollector(Collector):
    def __init__(self, state: AgentState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        if self._state.refresh is not None:
            self._state.refresh()
        for name, kind, text in SERIES:
            full = f"{PREFIX}_{name}"
            value = self._state.value(name)
            if kind == "counter":
                yield CounterMetricFamily(full.removesuffix("_total"), text, value=value)
            else:
                yield GaugeMetricFamily(full, text, value=value)


def _bound(bound: float) -> str:
    """A bucket's ``le`` as prometheus-client's own histogram spells it (``+Inf``, ``0.5``)."""
    text: str = floatToGoString(bound)  # type: ignore[no-untyped-call]
    return text


class _ReconcileCollector(Collector):
    """The reconcile histogram and ``reconcile_failures_total`` (always zero in the agent:
    the operator counts it; the series is shared)."""

    def __init__(self, histogram: ReconcileHistogram) -> None:
        self._histogram = histogram

    def collect(self) -> Iterator[Metric]:
        cumulative, total = self._histogram.snapshot()
        yield HistogramMetricFamily(
            f"{PREFIX}_reconcile_duration_seconds",
            "Seconds from a document's arrival to its files published.",
            buckets=[(_bound(bound), float(count)) for bound, count in cumulative],
            sum_value=total,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_reconcile_failures",
            "Reconciles that failed (the operator's; zero in the agent).",
            value=0.0,
        )


def build_registry(metrics: AgentMetrics) -> CollectorRegistry:
    """The state series in the contract's order, the reconcile pair, then store calls."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StateCollector(metrics.state))
    registry.register(_ReconcileCollector(metrics.reconcile))
    registry.register(StoreRequestsCollector(PREFIX))
    return registry
