"""The pydantic-settings source: BaseSettings users add dynconf in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from dynconf.config import DynamicConfig
from dynconf.settings import DynconfSettingsSource


def settings_class(path: Path, config: DynamicConfig[Any] | None = None) -> type[BaseSettings]:
    class Settings(BaseSettings):
        name: str = "default"
        port: int = 0

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            source = (
                DynconfSettingsSource(settings_cls, config=config)
                if config is not None
                else DynconfSettingsSource(settings_cls, key="app", files=[path])
            )
            return (init_settings, env_settings, source)

    return Settings


def test_settings_read_the_dynconf_section(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text('[app]\nname = "billing"\nport = 8080\n', encoding="utf-8")
    settings = settings_class(path)()
    assert (settings.name, settings.port) == ("billing", 8080)  # type: ignore[attr-defined]


def test_environment_still_wins_over_dynconf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "app.toml"
    path.write_text("[app]\nport = 8080\n", encoding="utf-8")
    monkeypatch.setenv("PORT", "9090")
    assert settings_class(path)().port == 9090  # type: ignore[attr-defined]


def test_live_config_supplies_its_installed_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text('[app]\nname = "one"\n', encoding="utf-8")
    config: DynamicConfig[Any] = DynamicConfig(None, "app").file(path)
    config.init()
    path.write_text('[app]\nname = "two"\n', encoding="utf-8")
    cls = settings_class(path, config)
    assert cls().name == "one"  # type: ignore[attr-defined]
    config.reload()
    assert cls().name == "two"  # type: ignore[attr-defined]
