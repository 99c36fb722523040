"""DynamicConfig.from_settings: a pydantic-settings class's declaration, as dynconf layers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from dynconf.config import DynamicConfig
from dynconf.errors import BackendError


class Db(BaseModel):
    host: str = "localhost"
    port: int = 5432


def settings_class(**config: Any) -> type[Any]:
    class Settings(BaseSettings):
        model_config = SettingsConfigDict(**config)  # type: ignore[typeddict-item]
        name: str = "app"
        debug: bool = False
        token: str = Field(default="", validation_alias="SERVICE_TOKEN")
        db: Db = Db()

    return Settings


def test_files_env_file_prefix_and_nested_delimiter_become_layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "app.toml").write_text('name = "billing"\n[db]\nhost = "db.internal"\n')
    (tmp_path / ".env").write_text("APP_DEBUG=true\n")
    monkeypatch.setenv("APP_DB__PORT", "6543")
    monkeypatch.setenv("SERVICE_TOKEN", "t0k")
    cls = settings_class(
        toml_file=tmp_path / "app.toml",
        env_file=tmp_path / ".env",
        env_prefix="app_",
        env_nested_delimiter="__",
    )
    config = DynamicConfig.from_settings(cls)
    ours = config.init()
    with pytest.warns(UserWarning, match="toml_file"):  # pydantic-settings alone skips the file
        theirs = cls()
    assert (theirs.debug, theirs.db.port, theirs.token) == (True, 6543, "t0k")  # same names
    assert ours.token == "t0k"
    assert (ours.name, ours.debug, ours.db.host, ours.db.port) == (
        "billing",
        True,
        "db.internal",
        6543,
    )
    assert "APP_DB__PORT" in str(config.source_of("db.port"))


def test_case_sensitive_names_keep_their_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("app_name", "lower")
    monkeypatch.setenv("APP_NAME", "upper")
    cls = settings_class(env_prefix="app_", case_sensitive=True)
    assert DynamicConfig.from_settings(cls).init().name == "lower"


def test_without_a_delimiter_nested_models_come_from_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_DB_PORT", "1")
    cls = settings_class(env_prefix="APP_")
    assert DynamicConfig.from_settings(cls).init().db.port == 5432


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"cli_parse_args": True}, "cli_parse_args"),
        ({"env_file_encoding": "latin-1"}, "env_file_encoding"),
    ],
)
def test_what_has_no_equivalent_is_refused_by_name(config: dict[str, Any], named: str) -> None:
    with pytest.raises(BackendError, match=named):
        DynamicConfig.from_settings(settings_class(**config))


def test_a_customised_source_order_is_refused_by_name() -> None:
    class Custom(BaseSettings):
        name: str = "x"

        @classmethod
        def settings_customise_sources(cls, settings_cls, *sources):  # type: ignore[no-untyped-def]
            return sources

    with pytest.raises(BackendError, match="settings_customise_sources"):
        DynamicConfig.from_settings(Custom)


def test_a_settings_model_reads_no_source_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation must not run pydantic-settings' own sources under the dynconf stack:
    ``APP_NAME`` is pydantic-settings' spelling, not one this configuration declared."""
    monkeypatch.setenv("APP_NAME", "hidden")
    cls = settings_class(env_prefix="APP_")
    config = DynamicConfig(cls, "").whole_document().set_default("debug", True)
    model = config.init()
    assert (model.name, model.debug) == ("app", True)
    assert DynamicConfig.from_settings(cls).init().name == "hidden"  # declared: bound
