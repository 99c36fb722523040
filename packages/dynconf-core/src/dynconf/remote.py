"""Store sources the way the book's Python binding writes them.

Three things live here:

* :data:`Format`, an enum of the *registered* formats, built from the format registry the
  first time it is asked for (a third-party format plugin adds a member; there is no
  second list). A subclass of :class:`~dynconf.stores.RemoteSource` may answer
  ``(text, Format.JSON)`` from ``fetch``.
* :class:`StoreSource` / :class:`AsyncStoreSource`, what the typed constructors
  (``Consul(endpoint, key, token=...)``) are: a :class:`~dynconf.stores.StoreSpec` checked
  by its store type's ``validate`` at construction (the agent's refusals, spelled with
  Python keywords), built through the store type's ``build`` on first use, so a store's
  client library is imported only when the source first reads.
* The constructors themselves, by name: ``from dynconf.remote import Consul`` asks the
  registry which installed store type declares a constructor named ``Consul`` and imports
  it from that store's package. The typed import is the store package's own
  (``from dynconf_store_consul import Consul``); this name is the binding's spelling.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import AsyncIterator, Callable, Iterator
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from dynconf.errors import BackendError, Origin
from dynconf.stores import (
    Absent,
    AsyncRemoteSource,
    Credential,
    Fetched,
    RemoteSource,
    StoreSpec,
    StoreType,
    WatchCapability,
    keyword_spelling,
)

__all__ = [
    "AsyncRemoteSource",
    "AsyncStoreSource",
    "Credential",
    "Fetched",
    "Format",
    "RemoteSource",
    "StoreSource",
    "format_enum",
]

if TYPE_CHECKING:
    Format: Any
    """The registered formats as a ``StrEnum`` (``Format.JSON == "json"``)."""

_FORMATS: dict[tuple[str, ...], type[StrEnum]] = {}


def format_enum() -> type[StrEnum]:
    """The ``Format`` enum of the formats the process registry holds now.

    One enum per set of registered names, so ``Format.JSON is Format.JSON`` holds for as
    long as the registry does not change.
    """
    from dynconf.plugins import default_registry

    names = tuple(sorted(default_registry().formats))
    if names not in _FORMATS:
        members = {re.sub(r"\W", "_", name).upper(): name for name in names}
        built: type[StrEnum] = StrEnum("Format", members, module=__name__)  # type: ignore[misc]
        _FORMATS[names] = built
    return _FORMATS[names]


def settings(**values: str | float | None) -> dict[str, str]:
    """A spec's ``extra`` from keyword arguments: the ones given, as text."""
    return {name: str(value) for name, value in values.items() if value is not None}


# --------------------------------------------------------------------------- sources
class _Built:
    """What both constructor bases share: admission at construction, a lazy build."""

    store: ClassVar[str] = ""
    _store_type: StoreType
    _spec: StoreSpec
    description: str
    capability: WatchCapability

    def _admit(self, spec: StoreSpec) -> None:
        from dynconf.plugins import default_registry

        self._store_type = default_registry().store(spec.source)
        self._spec = spec
        self.description = self._store_type.describe(spec)
        refusals = self._store_type.refusals(spec)
        if refusals:
            raise BackendError(
                "; ".join(refusal.render(keyword_spelling) for refusal in refusals),
                origin=Origin.remote(self.description),
            )
        self.capability = self._store_type.capability
        self._hooks: dict[str, Any] = {}

    @property
    def spec(self) -> StoreSpec:
        """The spec this source was admitted with (``repr`` shows no secret)."""
        return self._spec

    def describe(self) -> str:
        return self.description

    def __setattr__(self, name: str, value: Any) -> None:
        # the health hooks the agent and the engine set go to the built source too
        if name in ("on_failure", "on_watching"):
            self._hooks[name] = value
            built = self.__dict__.get("_source")
            if built is not None:
                setattr(built, name, value)
        object.__setattr__(self, name, value)

    def _build(self) -> Any:
        built = self.__dict__.get("_source")
        if built is None:
            built = self._store_type.build(self._spec)
            for name, hook in self._hooks.items():
                setattr(built, name, hook)
            object.__setattr__(self, "_source", built)
        return built

    @property
    def reports_watching(self) -> bool:
        """The built source's own declaration (``SourceSupport.reports_watching``)."""
        return getattr(self._build(), "reports_watching", False) is True

    @property
    def built(self) -> bool:
        """Whether the store client exists yet (its library is imported then)."""
        return "_source" in self.__dict__

    def another(self) -> Any:
        """A new client of the same store and spec, apart from this one: a follower's
        resyncs read through one of these, and a stalled watch is reopened on one."""
        return self._store_type.build(self._spec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.description!r})"


class StoreSource(_Built, RemoteSource):
    """A blocking store's source from Python arguments (the typed constructors' base)."""

    on_failure: Callable[..., None] | None = None
    on_watching: Callable[[], None] | None = None

    def __init__(self, spec: StoreSpec) -> None:
        self._admit(spec)

    @property
    def source(self) -> RemoteSource:
        """The store's own source, built now if it was not."""
        built: RemoteSource = self._build()
        return built

    def fetch(self) -> Fetched | Absent:
        return self.source.fetch()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        return self.source.changes(interval, stop)

    def close(self) -> None:
        if self.built:
            self.source.close()


class AsyncStoreSource(_Built, AsyncRemoteSource):
    """An async store's source from Python arguments (NATS)."""

    on_failure: Callable[..., None] | None = None
    on_watching: Callable[[], None] | None = None

    def __init__(self, spec: StoreSpec) -> None:
        self._admit(spec)

    @property
    def source(self) -> AsyncRemoteSource:
        built: AsyncRemoteSource = self._build()
        return built

    async def fetch(self) -> Fetched | Absent:
        return await self.source.fetch()

    def changes(self, interval: float) -> AsyncIterator[Fetched | Absent]:
        return self.source.changes(interval)

    async def aclose(self) -> None:
        if self.built:
            await self.source.aclose()


# --------------------------------------------------------------------------- names
def constructors() -> dict[str, str]:
    """Constructor name → ``module:attribute``, from every installed store type."""
    from dynconf.plugins import default_registry

    found: dict[str, str] = {}
    for store in default_registry().stores.values():
        target = getattr(store, "constructor", None)
        if isinstance(target, str) and ":" in target:
            found[target.rsplit(":", 1)[1]] = target
    return found


def __getattr__(name: str) -> Any:
    if name == "Format":
        return format_enum()
    target = constructors().get(name) if name[:1].isupper() else None
    if target is None:
        raise AttributeError(
            f"module 'dynconf.remote' has no attribute {name!r}; a store constructor needs "
            "its store package installed (pip install dynconf-store-<name>)"
        )
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
