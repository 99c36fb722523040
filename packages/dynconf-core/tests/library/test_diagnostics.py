"""check(), is_set(), snapshot() and replace(): answers about a configuration, as data."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from dynconf.config import DynamicConfig, ReloadReason
from dynconf.diagnostics import Change, UnknownKey
from dynconf.errors import NotInitialisedError


class Db(BaseModel):
    host: str
    port: int
    password: SecretStr = SecretStr("")


class App(BaseModel):
    name: str
    db: Db
    labels: dict[str, str] = {}


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "app.toml"
    path.write_text(
        '[app]\nname = "billing"\nnmae = "typo"\n[app.db]\nhost = "db"\nport = 5432\n'
        'password = "hunter2"\nhots = "x"\n[app.labels]\nteam = "pay"\n',
        encoding="utf-8",
    )
    return path


def test_check_lists_unknown_keys_with_a_near_name(config_file: Path) -> None:
    report = DynamicConfig(App, "app").file(config_file).check()
    assert report.would_load and not report.is_clean
    assert report.unknown == (UnknownKey("db.hots", "db.host"), UnknownKey("nmae", "name"))
    assert "did you mean `db.host`?" in str(report)


def test_check_reports_a_refusal_without_installing_or_counting_it(
    config_file: Path,
) -> None:
    config = DynamicConfig(App, "app").file(config_file).set_override("db.port", "many")
    report = config.check()
    assert not report.would_load
    assert (report.failure_kind, report.failure_path) == ("invalid", "db.port")
    assert "many" not in (report.failure or "") and "hunter2" not in str(report)
    assert config.generation == 0 and config.status().refusals == 0


def test_check_says_when_unknown_keys_cannot_be_checked(config_file: Path) -> None:
    report = DynamicConfig(None, "app").file(config_file).check()
    assert report.unknown == () and report.unknown_checked is False
    paths = {leaf.path for leaf in report.resolved}
    assert {"name", "db.port", "labels.team"} <= paths


def test_is_set_reads_the_sources_before_init(config_file: Path) -> None:
    config = DynamicConfig(App, "app").file(config_file)
    assert config.is_set("db.port") and config.is_set("db")
    assert not config.is_set("db.user")


def test_snapshot_has_values_paths_provenance_and_a_diff(config_file: Path) -> None:
    config = DynamicConfig(App, "app").file(config_file)
    with pytest.raises(NotInitialisedError):
        config.snapshot()
    config.init()
    before = config.snapshot()
    config.set_override("db.port", 6543)
    config.reload()
    after = config.snapshot()
    assert before.to_dict()["db"]["port"] == 5432 and after.to_dict()["db"]["port"] == 6543
    assert "db.password" in after.leaf_paths() and after.contains("labels.team")
    assert str(after.source_of("db.port")) == str(config.source_of("db.port"))
    assert before.diff(after) == [Change("db.port", "changed")]
    assert (after.generation, after.reason) == (2, "manual")
    assert "hunter2" not in repr(after) and "5432" not in repr(before)
    before.to_dict()["db"]["port"] = 1
    assert before.to_dict()["db"]["port"] == 5432


def test_replace_installs_the_callers_model_and_fires_hooks(config_file: Path) -> None:
    config = DynamicConfig(App, "app").file(config_file)
    config.init()
    seen: list[int] = []
    config.on_change("db.port", lambda _old, new: seen.append(new.db.port))
    model = config.current().model_copy(update={"db": Db(host="other", port=1)})
    config.replace(model)
    assert config.current() is model and config.generation == 2
    assert config.status().last_reason == ReloadReason.REPLACED.value
    assert seen == [1]
    assert config.snapshot().to_dict()["db"]["host"] == "other"


def test_replace_refuses_another_type(config_file: Path) -> None:
    config = DynamicConfig(App, "app").file(config_file)
    with pytest.raises(TypeError, match="takes a App, not Db"):
        config.replace(Db(host="h", port=1))  # type: ignore[arg-type]


def test_dataclass_models_report_unknown_keys_too(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Small:
        port: int

    (tmp_path / "s.toml").write_text("[s]\nport = 1\nprot = 2\n", encoding="utf-8")
    report = DynamicConfig(Small, "s").file(tmp_path / "s.toml").check()
    assert report.unknown == (UnknownKey("prot", "port"),)
    assert report.failure_kind == "invalid"


def test_check_lists_every_refused_field_with_the_layer_that_supplied_it(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIAGFIELDS_APP_DB__PORT", "soon")
    config_file.write_text(
        config_file.read_text(encoding="utf-8").replace('name = "billing"\n', ""),
        encoding="utf-8",
    )
    report = DynamicConfig(App, "app").file(config_file).env("DIAGFIELDS_").check()
    assert not report.would_load
    refused = {error.path: error for error in report.field_errors}
    assert set(refused) == {"name", "db.port"}
    assert refused["name"].origin is None
    assert str(refused["db.port"].origin) == "from DIAGFIELDS_APP_DB__PORT"
    assert "soon" not in str(report)
    assert "refused db.port: Input should be a valid integer" in str(report)
