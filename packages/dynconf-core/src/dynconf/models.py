"""Turning a resolved section into the caller's model, and the untyped model ``Values``.

The schema validates once per successful resolve; reads never validate. Pydantic models,
pydantic and standard dataclasses, any type a ``TypeAdapter`` understands, or no model at
all (``Values``, a read-only mapping with dotted lookups) are accepted. Validation errors
keep their paths and rules but lose every input value before they leave this module.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, SecretBytes, SecretStr, TypeAdapter, ValidationError

from dynconf.document import Document, deep_copy, get_path, leaf_paths
from dynconf.errors import InvalidError, Origin

__all__ = ["ModelAdapter", "Values", "secret_paths"]

M = TypeVar("M")


class Values(Mapping[str, Any]):
    """An untyped, read-only view of a resolved section.

    ``values["db.port"]`` follows dotted paths; ``len`` and iteration cover top-level keys;
    ``repr`` shows keys only, never values.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Document) -> None:
        self._data = data

    def __getitem__(self, path: str) -> Any:
        value = self._data[path] if path in self._data else get_path(self._data, path)
        return Values(value) if isinstance(value, dict) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        try:
            self[path]
        except (KeyError, ValueError, TypeError):
            return False
        return True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Values):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Values(keys={sorted(self._data)!r})"

    def to_dict(self) -> Document:
        """A deep copy of the section as plain dicts and lists."""
        copied: Document = deep_copy(self._data)
        return copied

    def leaf_paths(self) -> list[str]:
        return leaf_paths(self._data)

    def sub(self, path: str) -> Values:
        value = get_path(self._data, path)
        if not isinstance(value, dict):
            raise TypeError(f"`{path}` is not a table")
        return Values(value)


def _strip_values(errors: list[Any]) -> list[dict[str, object]]:
    cleaned: list[dict[str, object]] = []
    for error in errors:
        cleaned.append(
            {
                "type": error.get("type"),
                "loc": tuple(error.get("loc", ())),
                "msg": error.get("msg"),
            }
        )
    return cleaned


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


class ModelAdapter(Generic[M]):
    """Validates a section into one model type; built once per configuration."""

    def __init__(self, model: type[M] | None) -> None:
        self.model = model
        self._adapter: TypeAdapter[Any] | None = None
        if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
            self._adapter = TypeAdapter(model)

    @property
    def name(self) -> str:
        return "Values" if self.model is None else getattr(self.model, "__name__", "model")

    def validate(self, section: Document, *, key: str) -> M:
        model = self.model
        if model is None:
            return typing.cast(M, Values(section))
        if dataclasses.is_dataclass(model):
            unknown = _unknown_dataclass_keys(model, section, "")
            if unknown:
                extra = unknown[0]
                raise InvalidError(
                    f"`{extra}` in section `{key}`: {self.name} declares no such field; remove "
                    "the key or add the field to the model",
                    path=extra,
                    errors=[{"type": "extra_forbidden", "loc": tuple(extra.split(".")), "msg": ""}],
                )
        try:
            if self._adapter is None:
                pydantic_model = typing.cast(type[BaseModel], model)
                if _is_settings(pydantic_model):
                    return typing.cast(M, _validate_settings(pydantic_model, section))
                return typing.cast(M, pydantic_model.model_validate(section))
            return typing.cast(M, self._adapter.validate_python(section))
        except ValidationError as exc:
            errors = _strip_values(exc.errors(include_input=False, include_url=False))
            head = errors[0]
            path = _dotted(typing.cast(tuple[Any, ...], head["loc"]))
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise InvalidError(
                f"`{path or key}` does not fit {self.name}: {head['msg']}{more}; fix the "
                "value at that path or the model",
                path=path,
                errors=errors,
                origin=Origin.runtime("validation"),
            ) from None


def _is_settings(model: type[BaseModel]) -> bool:
    # a BaseSettings subclass exists only once pydantic_settings is imported
    settings = sys.modules.get("pydantic_settings")
    return settings is not None and issubclass(model, settings.BaseSettings)


def _validate_settings(model: type[BaseModel], section: Document) -> BaseModel:
    """Validate a ``BaseSettings`` class from ``section`` alone.

    Its own ``model_validate`` runs ``__init__``, which reads pydantic-settings' sources
    (the environment, ``.env``, secrets) under ours: a second, hidden stack that would
    fill any field the section leaves out, and bypass provenance and the hot reload.
    """
    from pydantic_settings import InitSettingsSource

    values = dict(section)
    return model(_build_sources=((InitSettingsSource(model, values),), values))  # type: ignore[arg-type]


def _unknown_dataclass_keys(model: Any, section: Mapping[str, Any], prefix: str) -> list[str]:
    try:
        hints = typing.get_type_hints(model)
    except Exception:
        hints = {}
    names = {f.name: f for f in dataclasses.fields(model)}
    unknown: list[str] = []
    for key, value in section.items():
        path = f"{prefix}{key}"
        if key not in names:
            unknown.append(path)
            continue
        hint = hints.get(key)
        if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            unknown.extend(_unknown_dataclass_keys(hint, value, f"{path}."))
    return sorted(unknown)


_SECRET_TYPES = (SecretStr, SecretBytes)


def _is_secret(annotation: Any) -> bool:
    if annotation in _SECRET_TYPES:
        return True
    return any(_is_secret(arg) for arg in typing.get_args(annotation))


_SECRETS_OF: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()
"""A model's secret paths, worked out once per class: walking the fields was a fifth of a
``DynamicConfig(...).init()`` on a 100-field model (bench/bench_load.py, cProfile)."""


def secret_paths(model: Any, prefix: str = "") -> list[str]:
    """Dotted paths of fields declared secret: ``SecretStr``/``SecretBytes`` (through
    Optional, unions and nested models) or dataclass ``metadata={"secret": True}``."""
    if prefix or not isinstance(model, type):
        return _secret_paths(model, prefix)
    known = _SECRETS_OF.get(model)
    if known is None:
        known = _SECRETS_OF[model] = tuple(_secret_paths(model, ""))
    return list(known)


def _secret_paths(model: Any, prefix: str) -> list[str]:
    found: list[str] = []
    if isinstance(model, type) and issubclass(model, BaseModel):
        for name, field in model.model_fields.items():
            spellings = {
                name,
                *(a for a in (field.alias, field.validation_alias) if isinstance(a, str)),
            }
            annotation = field.annotation
            if _is_secret(annotation):
                found.extend(f"{prefix}{s}" for s in sorted(spellings))
            for nested in (annotation, *typing.get_args(annotation)):
                if isinstance(nested, type) and (
                    issubclass(nested, BaseModel) or dataclasses.is_dataclass(nested)
                ):
                    found.extend(secret_paths(nested, f"{prefix}{name}."))
    elif dataclasses.is_dataclass(model):
        try:
            hints = typing.get_type_hints(model)
        except Exception:
            hints = {}
        for dc_field in dataclasses.fields(model):
            annotation = hints.get(dc_field.name)
            if dc_field.metadata.get("secret") or _is_secret(annotation):
                found.append(f"{prefix}{dc_field.name}")
            if isinstance(annotation, type) and (
                issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation)
            ):
                found.extend(secret_paths(annotation, f"{prefix}{dc_field.name}."))
    return sorted(set(found))
