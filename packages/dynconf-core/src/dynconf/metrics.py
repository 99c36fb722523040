"""The engine's own ``dynamic_config_*`` series, as a ``prometheus_client`` collector.

The application registers it on its registry; every sample comes from
:func:`dynconf.metric_samples.samples` at scrape time (the OpenTelemetry meter reads the
same), with no I/O and nothing kept between scrapes::

    registry.register(ConfigCollector().add("db", db_config))

Two name sets exist for the engine and both are emitted where they differ: the binding's
exposition names (``installs_total``, ``last_success_seconds``, ``remote_*`` ...), which
dashboards already chart, and the metrics-contract gauges (``generation``,
``snapshot_age_seconds``, ``reload_failed_total``, ``watch_running``). A fact that does
not exist yet is absent, not zero: no ``*_seconds`` before the first install or refusal,
no ``remote_up`` before the store was first asked. Labels are only ``config`` (the name the
application passes), ``reason`` (a :class:`~dynconf.config.ReloadReason` value) and
``kind`` (an error kind): never a value, a key path, a file name or a store address.

Needs ``prometheus-client`` (``pip install dynconf-core[metrics]``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dynconf.budget import CallLedger, ledger
from dynconf.metric_samples import METRIC_NAMES, SERIES, samples

if TYPE_CHECKING:
    from dynconf.config import DynamicConfig

__all__ = ["METRIC_NAMES", "ConfigCollector", "StoreRequestsCollector"]

_Family = CounterMetricFamily | GaugeMetricFamily


def _families() -> dict[str, _Family]:
    families: dict[str, _Family] = {}
    for series in SERIES:
        labels = ["config", *series.labels]
        if series.kind == "counter":
            name = series.name.removesuffix("_total")
            families[series.name] = CounterMetricFamily(name, series.doc, labels=labels)
        else:
            families[series.name] = GaugeMetricFamily(series.name, series.doc, labels=labels)
    return families


class ConfigCollector(Collector):
    """A collector over the configurations :meth:`add` names; register it once."""

    def __init__(self) -> None:
        self._configs: dict[str, DynamicConfig[Any]] = {}

    def add(self, name: str, config: DynamicConfig[Any]) -> ConfigCollector:
        """Report ``config`` under ``config="<name>"`` (a name of yours, never a path or a
        store address). Returns the collector, so calls chain."""
        if name in self._configs and self._configs[name] is not config:
            raise ValueError(f"the collector already reports a configuration named {name!r}")
        self._configs[name] = config
        return self

    def collect(self) -> Iterator[Metric]:
        f = _families()
        for sample in samples(self._configs):
            f[sample.series].add_metric(list(sample.labels), sample.value)
        yield from (family for family in f.values() if family.samples)


class StoreRequestsCollector(Collector):
    """``<prefix>_store_requests_total{store,endpoint,outcome}``: the process's store calls.

    Read from the process's :class:`~dynconf.budget.CallLedger` at scrape; each component
    registers it once with its own prefix (``dynamic_config_agent``, ``dynamic_config_operator``,
    ``dynamic_config_node_agent``, ``dynconf_server``; ``dynamic_config`` for an application
    using :class:`~dynconf.config.DynamicConfig`). No sample before a store is first called.
    """

    def __init__(self, prefix: str, calls: CallLedger | None = None) -> None:
        self._name = f"{prefix}_store_requests"
        self._ledger = calls

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            self._name,
            "Calls made to a store, by store, endpoint (scheme://host:port) and outcome.",
            labels=["store", "endpoint", "outcome"],
        )
        for store, endpoint, outcome, count in (self._ledger or ledger()).samples():
            family.add_metric([store, endpoint, outcome], count)
        yield family
