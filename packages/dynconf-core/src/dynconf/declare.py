"""Declarative use: ``@dynamic_config(...)`` on the model class, and the ``Configured`` base.

For code that imports a class rather than being handed an object. The decorator builds one
:class:`~dynconf.config.DynamicConfig` from its keyword arguments (each is one builder
method), stores it as ``Model.config`` and gives the class the readers that go through it
(``current``, ``try_current``, ``reload``, ``source_of``, ``explain``). It loads nothing:
import time is the wrong time to read files; call ``Model.config.init()`` (or use
``Model.config.running_async()`` as a lifespan).

Inherit :class:`Configured` to let a type checker see those readers; the decorator alone
works the same at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from dynconf.cache import CacheMode
from dynconf.config import DynamicConfig
from dynconf.errors import Origin

__all__ = ["Configured", "dynamic_config"]

T = TypeVar("T")
_READERS = ("config", "current", "try_current", "reload", "source_of", "explain")


class Configured:
    """The readers ``@dynamic_config`` attaches, declared where a type checker sees them."""

    config: ClassVar[DynamicConfig[Any]]

    @classmethod
    def current(cls) -> Self:
        return cls._config().current()  # type: ignore[no-any-return]

    @classmethod
    def try_current(cls) -> Self | None:
        return cls._config().try_current()

    @classmethod
    def reload(cls) -> Self:
        return cls._config().reload()  # type: ignore[no-any-return]

    @classmethod
    def source_of(cls, path: str) -> Origin | None:
        return cls._config().source_of(path)

    @classmethod
    def explain(cls, path: str) -> Any:
        return cls._config().explain(path)

    @classmethod
    def _config(cls) -> DynamicConfig[Any]:
        config = cls.__dict__.get("config")
        if not isinstance(config, DynamicConfig):
            raise TypeError(
                f"{cls.__name__} inherits Configured but has no @dynamic_config(...); "
                "decorate the class to attach its configuration"
            )
        return config


def dynamic_config(
    *,
    key: str,
    files: Sequence[str | Path] = (),
    env: str | None = None,
    nest: str | None = None,
    env_files: Sequence[str | Path] = (),
    secrets_dir: str | Path | None = None,
    profile_env: str | None = None,
    whole_document: bool = False,
    cache: str | Path | None = None,
    cache_mode: CacheMode | str = CacheMode.REDACTED,
) -> Callable[[type[T]], type[T]]:
    """Attach a :class:`DynamicConfig` for ``key`` to the decorated model class."""

    def decorate(model: type[T]) -> type[T]:
        if isinstance(model.__dict__.get("config"), DynamicConfig):
            raise TypeError(f"{model.__name__} already has a @dynamic_config; one per class")
        fields = set(getattr(model, "model_fields", {})) | set(
            getattr(model, "__dataclass_fields__", {})
        )
        clash = sorted(fields & set(_READERS))
        if clash:
            raise TypeError(
                f"{model.__name__} declares the field {', '.join(clash)}, a name "
                "@dynamic_config attaches; rename the field or use DynamicConfig directly"
            )
        config: DynamicConfig[T] = DynamicConfig(model, key)
        for path in files:
            config.file(path)
        if env is not None:
            config.env(env)
        if nest is not None:
            config.nest(nest)
        for path in env_files:
            config.env_file(path)
        if secrets_dir is not None:
            config.secrets_dir(secrets_dir)
        if profile_env is not None:
            config.profile_env(profile_env)
        if whole_document:
            config.whole_document()
        if cache is not None:
            config.cache(cache, cache_mode)
        type.__setattr__(model, "config", config)
        if not issubclass(model, Configured):
            for name in _READERS[1:]:
                type.__setattr__(model, name, classmethod(vars(Configured)[name].__func__))
            type.__setattr__(model, "_config", classmethod(vars(Configured)["_config"].__func__))
        return model

    return decorate
