"""The engine's dynamic_config_* series through a prometheus_client collector."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

from dynconf.config import DynamicConfig
from dynconf.errors import DynconfError, ParseError
from dynconf.file_store import FILE_STORE
from dynconf.metrics import METRIC_NAMES, ConfigCollector
from dynconf.stores import StoreSpec


class Db(BaseModel):
    port: int


def scrape(registry: CollectorRegistry) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "app.toml"
    path.write_text("[db]\nport = 5432\n", encoding="utf-8")
    return path


def test_before_init_only_the_counts_exist(config_file: Path) -> None:
    registry = CollectorRegistry()
    registry.register(ConfigCollector().add("db", DynamicConfig(Db, "db").file(config_file)))
    samples = scrape(registry)
    assert samples["dynamic_config_installs_total"] == {(("config", "db"),): 0.0}
    assert samples["dynamic_config_generation"] == {(("config", "db"),): 0.0}
    assert "dynamic_config_last_success_seconds" not in samples  # absent, not zero
    assert "dynamic_config_last_reload_info" not in samples
    assert "dynamic_config_remote_up" not in samples


def test_installs_refusals_and_age_are_reported(config_file: Path) -> None:
    config = DynamicConfig(Db, "db").file(config_file)
    registry = CollectorRegistry()
    registry.register(ConfigCollector().add("db", config))
    config.init()
    config.reload()
    config_file.write_text("[db\n", encoding="utf-8")
    with pytest.raises(ParseError):
        config.reload()
    samples = scrape(registry)
    label = (("config", "db"),)
    assert samples["dynamic_config_installs_total"][label] == 2
    assert samples["dynamic_config_generation"][label] == 2
    assert samples["dynamic_config_reload_failed_total"][label] == 1
    assert samples["dynamic_config_consecutive_failures"][label] == 1
    assert 0 <= samples["dynamic_config_snapshot_age_seconds"][label] < 60
    assert 0 <= samples["dynamic_config_last_success_seconds"][label] < 60
    assert samples["dynamic_config_last_reload_info"] == {
        (("config", "db"), ("reason", "manual")): 1
    }
    assert samples["dynamic_config_last_failure_info"] == {(("config", "db"), ("kind", "parse")): 1}
    assert samples["dynamic_config_watch_running"][label] == 0
    with config.watching():
        assert scrape(registry)["dynamic_config_watch_running"][label] == 1


def test_remote_series_follow_the_store(tmp_path: Path) -> None:
    document = tmp_path / "remote.json"
    document.write_text('{"db": {"port": 1}}', encoding="utf-8")
    source = FILE_STORE.build(StoreSpec(source="file", endpoint="", key=str(document)))
    config = DynamicConfig(Db, "db").remote(source)
    registry = CollectorRegistry()
    registry.register(ConfigCollector().add("db", config))
    assert "dynamic_config_remote_up" not in scrape(registry)
    config.init()
    samples = scrape(registry)
    label = (("config", "db"),)
    assert samples["dynamic_config_remote_up"][label] == 1
    assert samples["dynamic_config_remote_fetches_total"][label] == 1
    assert samples["dynamic_config_remote_consecutive_failures"][label] == 0
    assert "dynamic_config_remote_last_fetch_duration_seconds" in samples
    document.unlink()
    document.mkdir()  # a directory where the document was: the store cannot read it
    with pytest.raises(DynconfError):
        config.refresh_remote()
    samples = scrape(registry)
    assert samples["dynamic_config_remote_up"][label] == 0
    assert samples["dynamic_config_remote_consecutive_failures"][label] == 1
    assert list(samples["dynamic_config_remote_last_failure_info"]) == [
        (("config", "db"), ("kind", "io"))
    ]


def test_every_emitted_name_is_a_declared_contract_name(config_file: Path) -> None:
    config = DynamicConfig(Db, "db").file(config_file)
    config.init()
    registry = CollectorRegistry()
    registry.register(ConfigCollector().add("db", config))
    names = {name.removesuffix("_created") for name in scrape(registry)}
    assert names <= set(METRIC_NAMES)
    assert all(name.startswith("dynamic_config_") for name in METRIC_NAMES)


def test_a_name_reported_twice_is_refused(config_file: Path) -> None:
    collector = ConfigCollector().add("db", DynamicConfig(Db, "db"))
    with pytest.raises(ValueError, match="already reports"):
        collector.add("db", DynamicConfig(Db, "db"))
