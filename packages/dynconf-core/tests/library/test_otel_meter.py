"""The dynamic_config_* series through a real OpenTelemetry SDK meter (in-memory reader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from dynconf.config import DynamicConfig
from dynconf.metrics import ConfigCollector
from dynconf.otel import ConfigMeter


def points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], float]]]:
    data = reader.get_metrics_data()
    found: dict[str, list[tuple[dict[str, Any], float]]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = [
                    (dict(point.attributes or {}), point.value)  # type: ignore[union-attr]
                    for point in metric.data.data_points
                ]
    return found


def test_the_meter_reports_installs_and_refusals_as_the_collector_does(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text("[db]\nport = 1\n", encoding="utf-8")
    config = DynamicConfig(None, "db").file(path)
    config.init()
    config.reload()
    path.write_text("[db\n", encoding="utf-8")
    assert not config.try_reload()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        ConfigMeter(provider.get_meter("test")).add("db", config)
        got = points(reader)
    finally:
        provider.shutdown()
    assert got["dynamic_config_installs_total"] == [({"config": "db"}, 2)]
    assert got["dynamic_config_reload_failed_total"] == [({"config": "db"}, 1)]
    assert got["dynamic_config_generation"] == [({"config": "db"}, 2)]
    assert got["dynamic_config_last_failure_info"] == [({"config": "db", "kind": "parse"}, 1)]
    assert got["dynamic_config_last_reload_info"] == [({"config": "db", "reason": "manual"}, 1)]
    registry = CollectorRegistry()
    registry.register(ConfigCollector().add("db", config))
    assert registry.get_sample_value("dynamic_config_installs_total", {"config": "db"}) == 2
    assert "dynamic_config_remote_up" not in got  # no remote: absent, not zero


def test_the_meter_reports_the_remote_series_with_the_collector_values() -> None:
    from dynconf.remote import Format
    from dynconf.stores import RemoteSource

    class Memory(RemoteSource):
        def fetch(self) -> tuple[str, Format]:  # type: ignore[override]
            return '{"db": {"port": 1}}', Format.JSON

        def describe(self) -> str:
            return "memory"

    config = DynamicConfig(None, "db").remote(Memory())
    config.init()
    config.refresh_remote()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        ConfigMeter(provider.get_meter("test")).add("db", config)
        got = points(reader)
    finally:
        provider.shutdown()
    registry = CollectorRegistry()
    registry.register(ConfigCollector().add("db", config))
    for name in ("remote_up", "remote_fetches_total", "remote_consecutive_failures"):
        expected = registry.get_sample_value(f"dynamic_config_{name}", {"config": "db"})
        assert got[f"dynamic_config_{name}"] == [({"config": "db"}, expected)]
    assert got["dynamic_config_remote_fetches_total"] == [({"config": "db"}, 2)]
