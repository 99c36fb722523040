"""A pydantic-settings source, so ``BaseSettings`` users add dynconf where they already are.

``settings_customise_sources`` returns the sources in priority order (first wins); put
the dynconf source where its layers belong, typically after init kwargs and the
environment::

    class Settings(BaseSettings):
        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, env_settings,
                                       dotenv_settings, file_secret_settings):
            return (init_settings, env_settings,
                    DynconfSettingsSource(settings_cls, key="app", files=["app.toml"]))

The source resolves the whole dynconf stack (files, profiles, remote, secrets, ``.env``,
environment) each time the settings class is instantiated, or reads the installed
snapshot of a live :class:`~dynconf.config.DynamicConfig` when one is given.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from dynconf.config import DynamicConfig
from dynconf.document import Document, deep_copy
from dynconf.resolve import LoadSpec, resolve

__all__ = ["DynconfSettingsSource"]


class DynconfSettingsSource(PydanticBaseSettingsSource):
    """Supplies a settings class's fields from a dynconf section."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        *,
        key: str = "",
        files: Collection[str | Path] = (),
        env_prefix: str | None = None,
        env_files: Collection[str | Path] = (),
        secrets_dir: str | Path | None = None,
        profile_env: str | None = None,
        whole_document: bool = False,
        config: DynamicConfig[Any] | None = None,
    ) -> None:
        super().__init__(settings_cls)
        self._config = config
        self._spec = LoadSpec(
            key=key,
            files=[Path(f) for f in files],
            env_prefix=env_prefix,
            env_files=[Path(f) for f in env_files],
            secrets_dir=Path(secrets_dir) if secrets_dir is not None else None,
            profile_env=profile_env,
            whole_document=whole_document or not key,
        )

    def _section(self) -> Document:
        if self._config is not None:
            snapshot = self._config._snapshot
            if snapshot is None:
                self._config.init()
                snapshot = self._config._snapshot
            assert snapshot is not None
            return snapshot.resolved.section
        return resolve(self._spec).section

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        section = self._section()
        return section.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        section = self._section()
        fields = self.settings_cls.model_fields
        out: dict[str, Any] = {}
        for name, info in fields.items():
            for spelling in (name, info.alias):
                if spelling and spelling in section:
                    out[spelling] = deep_copy(section[spelling])
                    break
        return out
