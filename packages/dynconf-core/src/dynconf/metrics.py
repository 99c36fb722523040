"""The engine's own ``dynamic_config_*`` series, as a ``prometheus_client`` collector.

The application registers it on its registry; every sample is read from ``status()`` and
``remote_status()`` at scrape time (no I/O, nothing kept between scrapes)::

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

import time
from collections.abc import Iterator
from typing import Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dynconf.config import DynamicConfig

__all__ = ["METRIC_NAMES", "ConfigCollector"]

_P: Final = "dynamic_config_"
METRIC_NAMES: Final = (
    f"{_P}installs_total",
    f"{_P}reload_failed_total",
    f"{_P}generation",
    f"{_P}last_success_seconds",
    f"{_P}snapshot_age_seconds",
    f"{_P}consecutive_failures",
    f"{_P}last_failure_seconds",
    f"{_P}last_reload_info",
    f"{_P}last_failure_info",
    f"{_P}watch_running",
    f"{_P}remote_up",
    f"{_P}remote_fetches_total",
    f"{_P}remote_last_fetch_seconds",
    f"{_P}remote_last_fetch_duration_seconds",
    f"{_P}remote_consecutive_failures",
    f"{_P}remote_last_failure_info",
)
"""Every series name this collector can emit (contract spellings, declared once)."""


_Family = CounterMetricFamily | GaugeMetricFamily


def _families() -> dict[str, _Family]:
    def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> CounterMetricFamily:
        return CounterMetricFamily(_P + name, doc, labels=["config", *labels])

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(_P + name, doc, labels=["config", *labels])

    families: list[_Family] = [
        counter("installs_total", "Snapshots installed since the process started."),
        counter("reload_failed_total", "Reloads refused since the process started."),
        gauge("generation", "The generation of the serving snapshot."),
        gauge("last_success_seconds", "Seconds since the serving snapshot was installed."),
        gauge("snapshot_age_seconds", "Seconds since the serving snapshot was installed."),
        gauge("consecutive_failures", "Refused reloads since the last install (0 = healthy)."),
        gauge("last_failure_seconds", "Seconds since the last refused reload."),
        gauge("last_reload_info", "Why the serving snapshot was installed.", ("reason",)),
        gauge("last_failure_info", "The kind of the last refused reload.", ("kind",)),
        gauge("watch_running", "1 while a file watch or remote follower runs."),
        gauge("remote_up", "1 if the last fetch from the store succeeded, else 0."),
        counter("remote_fetches_total", "Documents the store handed over (pull or push)."),
        gauge("remote_last_fetch_seconds", "Seconds since the store last handed one over."),
        gauge("remote_last_fetch_duration_seconds", "Duration of the last pulled fetch."),
        gauge("remote_consecutive_failures", "Failed fetches since the last good one."),
        gauge("remote_last_failure_info", "The kind of the last failed fetch.", ("kind",)),
    ]
    return {family.name: family for family in families}


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
        now = time.monotonic()

        def put(family: str, name: str, value: float, *labels: str) -> None:
            f[_P + family.removesuffix("_total")].add_metric([name, *labels], value)

        for name, config in self._configs.items():
            status = config.status()
            put("installs_total", name, status.generation)
            put("reload_failed_total", name, status.refusals)
            put("generation", name, status.generation)
            put("consecutive_failures", name, status.consecutive_failures)
            put("watch_running", name, 1.0 if config.watching_now else 0.0)
            if status.loaded_at is not None:
                put("last_success_seconds", name, now - status.loaded_at)
                put("snapshot_age_seconds", name, now - status.loaded_at)
            if status.last_reason is not None:
                put("last_reload_info", name, 1.0, status.last_reason)
            if status.last_failure is not None:
                put("last_failure_seconds", name, now - status.last_failure.at)
                put("last_failure_info", name, 1.0, status.last_failure.kind)
            remote = config.remote_status()
            if remote is None:
                continue
            put("remote_fetches_total", name, remote.fetches)
            put("remote_consecutive_failures", name, remote.consecutive_failures)
            if remote.reachable is not None:
                put("remote_up", name, 1.0 if remote.reachable else 0.0)
            if remote.last_fetch is not None:
                put("remote_last_fetch_seconds", name, now - remote.last_fetch)
            if remote.last_fetch_duration is not None:
                put("remote_last_fetch_duration_seconds", name, remote.last_fetch_duration)
            if remote.last_failure is not None:
                put("remote_last_failure_info", name, 1.0, remote.last_failure.kind)
        yield from (family for family in f.values() if family.samples)
