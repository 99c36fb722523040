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
from dynconf.errors import BackendError, Origin
from dynconf.resolve import LoadSpec, resolve

__all__ = ["DynconfSettingsSource", "from_settings"]


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


# ---------------------------------------------------------------------------- from_settings
_FILE_KEYS = ("toml_file", "json_file", "yaml_file")
_UTF8 = (None, "utf-8", "utf8", "UTF-8")
_ENCODINGS = ("env_file_encoding", "json_file_encoding", "yaml_file_encoding")


def _paths(value: Any) -> list[Path]:
    if value is None:
        return []
    if isinstance(value, str | Path):
        return [Path(value)]
    return [Path(item) for item in value]


def _leaf_fields(model: type[Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Dotted field paths down to scalar leaves (nested models are walked)."""
    from pydantic import BaseModel

    leaves: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            leaves.extend(_leaf_fields(annotation, (*prefix, name)))
        else:
            leaves.append((*prefix, name))
    return leaves


def _untranslatable(settings_cls: type[BaseSettings]) -> list[str]:
    config: dict[str, Any] = dict(settings_cls.model_config)
    refused = [
        name
        for name in ("cli_parse_args", "yaml_config_section", "env_parse_none_str")
        if config.get(name)
    ]
    refused += [name for name in _ENCODINGS if config.get(name) not in _UTF8]
    if settings_cls.settings_customise_sources.__func__ is not (  # type: ignore[attr-defined]
        BaseSettings.settings_customise_sources.__func__  # type: ignore[attr-defined]
    ):
        refused.append("settings_customise_sources")
    return sorted(refused)


def from_settings(settings_cls: type[BaseSettings], key: str = "") -> DynamicConfig[Any]:
    """A :class:`DynamicConfig` whose layers are what ``settings_cls`` declares.

    ``toml_file`` / ``json_file`` / ``yaml_file`` become files (in that order, later wins),
    ``env_file`` the ``.env`` layer, ``secrets_dir`` the secrets directory, and every leaf
    field one environment binding named as pydantic-settings names it: ``env_prefix`` +
    the field (an alias, when the field has one, instead), nested fields joined with
    ``env_nested_delimiter`` (without one, only top-level scalar fields are bound:
    pydantic-settings would read a nested model from one JSON variable), upper-cased unless
    ``case_sensitive``. With ``key=""`` the files are the whole document, as
    pydantic-settings reads them. Settings with no equivalent are refused by name.
    """
    refused = _untranslatable(settings_cls)
    if refused:
        raise BackendError(
            f"{settings_cls.__name__} sets {', '.join(refused)} in its settings, which "
            "DynamicConfig cannot translate; remove them, or build the DynamicConfig "
            "with the builder methods instead",
            origin=Origin.runtime("from_settings"),
        )
    config: dict[str, Any] = dict(settings_cls.model_config)
    built: DynamicConfig[Any] = DynamicConfig(settings_cls, key)
    if not key:
        built.whole_document()
    for name in _FILE_KEYS:
        for path in _paths(config.get(name)):
            built.file(path)
    for path in _paths(config.get("env_file")):
        built.env_file(path)
    for path in _paths(config.get("secrets_dir")):
        built.secrets_dir(path)
    prefix = config.get("env_prefix") or ""
    delimiter = config.get("env_nested_delimiter")
    sensitive = bool(config.get("case_sensitive"))
    for segments in _leaf_fields(settings_cls):
        if len(segments) > 1 and not delimiter:
            continue  # pydantic-settings reads a nested model from JSON; files supply it here
        info = settings_cls.model_fields[segments[0]]
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        if alias and len(segments) == 1:
            # the model validates the alias spelling, so that is the path and the variable
            built.bind_env(alias, alias if sensitive else alias.upper())
            continue
        variable = prefix + (delimiter or "").join(segments)
        built.bind_env(".".join(segments), variable if sensitive else variable.upper())
    return built
