"""The engine's ``dynamic_config_*`` series as plain samples: the one source of the values.

Both exporters read from here: :class:`dynconf.metrics.ConfigCollector` (prometheus_client)
and :class:`dynconf.otel.ConfigMeter` (an OpenTelemetry ``Meter``). Every sample is read
from ``status()`` and ``remote_status()`` when it is asked for (no I/O, nothing kept). A
fact that does not exist yet is absent, not zero. Labels are only ``config`` (the name the
application passes), ``reason`` and ``kind``: never a value, a path or a store address.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from dynconf.config import DynamicConfig

__all__ = ["METRIC_NAMES", "SERIES", "Sample", "Series", "samples"]

_P: Final = "dynamic_config_"


@dataclass(frozen=True, slots=True)
class Series:
    """One series: its contract name, counter or gauge, help text, labels after ``config``."""

    name: str
    kind: Literal["counter", "gauge"]
    doc: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Sample:
    series: str
    labels: tuple[str, ...]
    """Label values in the series' order, ``config`` first."""
    value: float


def _counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Series:
    return Series(_P + name, "counter", doc, labels)


def _gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Series:
    return Series(_P + name, "gauge", doc, labels)


SERIES: Final = (
    _counter("installs_total", "Snapshots installed since the process started."),
    _counter("reload_failed_total", "Reloads refused since the process started."),
    _gauge("generation", "The generation of the serving snapshot."),
    _gauge("last_success_seconds", "Seconds since the serving snapshot was installed."),
    _gauge("snapshot_age_seconds", "Seconds since the serving snapshot was installed."),
    _gauge("consecutive_failures", "Refused reloads since the last install (0 = healthy)."),
    _gauge("last_failure_seconds", "Seconds since the last refused reload."),
    _gauge("last_reload_info", "Why the serving snapshot was installed.", ("reason",)),
    _gauge("last_failure_info", "The kind of the last refused reload.", ("kind",)),
    _gauge("watch_running", "1 while a file watch or remote follower runs."),
    _gauge("remote_up", "1 if the last fetch from the store succeeded, else 0."),
    _counter("remote_fetches_total", "Documents the store handed over (pull or push)."),
    _gauge("remote_last_fetch_seconds", "Seconds since the store last handed one over."),
    _gauge("remote_last_fetch_duration_seconds", "Duration of the last pulled fetch."),
    _gauge("remote_consecutive_failures", "Failed fetches since the last good one."),
    _gauge("remote_last_failure_info", "The kind of the last failed fetch.", ("kind",)),
)
"""Every series, in exposition order (contract spellings, declared once)."""

METRIC_NAMES: Final = tuple(series.name for series in SERIES)


def samples(configs: Mapping[str, DynamicConfig[Any]]) -> Iterator[Sample]:
    """Every sample of every configuration, read now."""
    now = time.monotonic()
    for name, config in configs.items():

        def put(series: str, value: float, *labels: str, name: str = name) -> Sample:
            return Sample(_P + series, (name, *labels), float(value))

        status = config.status()
        yield put("installs_total", status.generation)
        yield put("reload_failed_total", status.refusals)
        yield put("generation", status.generation)
        yield put("consecutive_failures", status.consecutive_failures)
        yield put("watch_running", 1.0 if config.watching_now else 0.0)
        if status.loaded_at is not None:
            yield put("last_success_seconds", now - status.loaded_at)
            yield put("snapshot_age_seconds", now - status.loaded_at)
        if status.last_reason is not None:
            yield put("last_reload_info", 1.0, status.last_reason)
        if status.last_failure is not None:
            yield put("last_failure_seconds", now - status.last_failure.at)
            yield put("last_failure_info", 1.0, status.last_failure.kind)
        remote = config.remote_status()
        if remote is None:
            continue
        yield put("remote_fetches_total", remote.fetches)
        yield put("remote_consecutive_failures", remote.consecutive_failures)
        if remote.reachable is not None:
            yield put("remote_up", 1.0 if remote.reachable else 0.0)
        if remote.last_fetch is not None:
            yield put("remote_last_fetch_seconds", now - remote.last_fetch)
        if remote.last_fetch_duration is not None:
            yield put("remote_last_fetch_duration_seconds", remote.last_fetch_duration)
        if remote.last_failure is not None:
            yield put("remote_last_failure_info", 1.0, remote.last_failure.kind)
