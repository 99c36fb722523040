"""Every way a plugin extends dynconf, in one place, and the registry that holds them.

A plugin is one module of ``@hookimpl`` functions named by an entry point in the group
``dynconf``. Three hooks exist: ``dynconf_formats`` (parse / serialise a document format),
``dynconf_stores`` (a remote store type) and ``dynconf_template_filters`` (jinja2 filters
for rendering templates). The built-in formats, filters and the embedded ``file`` store are
registered through the very same hooks, from :mod:`dynconf.builtin`.

Discovery has two modes:

* **open** (in-process default): every installed entry point in the group is loaded;
* **locked**: a lock file written by ``dynconf plugins lock`` names exactly which
  (distribution, version, entry point) triples to load. A process started with a lock loads
  those and nothing else, refuses to start when one is missing or at another version, and
  never enumerates installed metadata: each pinned distribution is looked up by name.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import pluggy

from dynconf.errors import BackendError, MissingError, Origin

if TYPE_CHECKING:
    from dynconf.document import Document
    from dynconf.stores import StoreType

__all__ = [
    "ENTRY_POINT_GROUP",
    "LOCK_ENV",
    "FormatType",
    "LockEntry",
    "PluginLock",
    "Registry",
    "default_registry",
    "discover",
    "hookimpl",
    "hookspec",
    "load_locked",
    "reset_default_registry",
]

PROJECT: Final = "dynconf"
ENTRY_POINT_GROUP: Final = "dynconf"
LOCK_ENV: Final = "DYNCONF_PLUGIN_LOCK"
"""When set, the default registry is built from this lock file instead of discovery."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@dataclass(frozen=True)
class FormatType:
    """A document format: how to read text into a document and (optionally) write it back.

    ``parse(text, origin)`` raises :class:`dynconf.errors.ParseError` with a line (and
    column when known) and never the text. ``dump(document)`` raises
    :class:`dynconf.errors.TypeMismatchError` naming the path of anything the format cannot
    hold; ``None`` means the format is read-only. ``flat`` marks formats with no arrays and
    widening scalars (ini, properties, env): they are rendered for consumers but refused by
    a typed round-trip save. ``discovery_rank`` orders the extensions ``discover(name,
    dirs)`` tries (lowest first; ``None``: never discovered, as a dotenv file is the env
    layer's input rather than a document); a plugin's format is tried after the built-ins.
    """

    name: str
    extensions: tuple[str, ...]
    parse: Callable[[str, Origin], Document]
    dump: Callable[[Document], str] | None = None
    flat: bool = False
    discovery_rank: int | None = 100


class DynconfHookSpecs:
    """The hook specifications: what a ``dynconf`` plugin module may implement."""

    @hookspec
    def dynconf_formats(self) -> Iterable[FormatType]:  # type: ignore[empty-body]
        """Document formats this plugin contributes."""

    @hookspec
    def dynconf_stores(self) -> Iterable[StoreType]:  # type: ignore[empty-body]
        """Store types this plugin contributes (one per distribution, by convention)."""

    @hookspec
    def dynconf_template_filters(self) -> Mapping[str, Callable[..., Any]]:  # type: ignore[empty-body]
        """Template filters (name → function) this plugin adds to the rendering sandbox.

        A filter must be pure: no file, environment or network access, so the same
        document renders the same bytes on every pod.
        """


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One pinned plugin: the distribution, its exact version, and its entry point."""

    distribution: str
    version: str
    name: str
    value: str


@dataclass(frozen=True)
class PluginLock:
    """The allowlist an image or deployment pins: exactly these plugins load."""

    entries: tuple[LockEntry, ...]

    def to_json(self) -> str:
        body = {
            "version": 1,
            "group": ENTRY_POINT_GROUP,
            "plugins": [
                {
                    "distribution": e.distribution,
                    "version": e.version,
                    "name": e.name,
                    "value": e.value,
                }
                for e in sorted(self.entries, key=lambda e: (e.distribution, e.name))
            ],
        }
        return json.dumps(body, indent=2) + "\n"

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> PluginLock:
        origin = Origin.file(str(path))
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise BackendError(
                f"the plugin lock cannot be read ({exc.strerror}); write one with "
                "`dynconf plugins lock --output PATH`",
                origin=origin,
            ) from None
        except json.JSONDecodeError as exc:
            raise BackendError(
                f"the plugin lock is not JSON (line {exc.lineno}); regenerate it with "
                "`dynconf plugins lock`",
                origin=origin,
            ) from None
        if not isinstance(raw, dict) or raw.get("version") != 1:
            raise BackendError(
                "the plugin lock has no `version: 1`; regenerate it with `dynconf plugins lock`",
                origin=origin,
            )
        entries: list[LockEntry] = []
        for index, item in enumerate(raw.get("plugins", [])):
            try:
                entries.append(
                    LockEntry(
                        distribution=str(item["distribution"]),
                        version=str(item["version"]),
                        name=str(item["name"]),
                        value=str(item["value"]),
                    )
                )
            except (KeyError, TypeError):
                raise BackendError(
                    f"plugins[{index}] in the plugin lock needs distribution, version, name "
                    "and value; regenerate it with `dynconf plugins lock`",
                    origin=origin,
                ) from None
        return cls(tuple(entries))


@dataclass
class Registry:
    """The loaded plugins: formats by name and extension, stores, template filters."""

    formats: dict[str, FormatType] = field(default_factory=dict)
    extensions: dict[str, str] = field(default_factory=dict)
    stores: dict[str, StoreType] = field(default_factory=dict)
    filters: dict[str, Callable[..., Any]] = field(default_factory=dict)
    plugins: list[LockEntry] = field(default_factory=list)
    manager: pluggy.PluginManager | None = None

    def format_named(self, name: str) -> FormatType:
        try:
            return self.formats[name.lower()]
        except KeyError:
            known = ", ".join(sorted(self.formats))
            raise BackendError(
                f"no format is named `{name}`; use one of: {known}",
            ) from None

    def format_for_extension(self, extension: str) -> FormatType | None:
        name = self.extensions.get(extension.lower().lstrip("."))
        return self.formats[name] if name else None

    def discovery_extensions(self) -> tuple[str, ...]:
        """The extensions ``discover`` tries, in order (the formats' own ``discovery_rank``)."""
        ranked = sorted(
            (fmt for fmt in self.formats.values() if fmt.discovery_rank is not None),
            key=lambda fmt: fmt.discovery_rank or 0,
        )
        return tuple(ext for fmt in ranked for ext in fmt.extensions)

    def format_for_path(self, path: str | os.PathLike[str]) -> FormatType:
        """The format a file name's extension names; an error names the known extensions."""
        suffix = Path(path).suffix
        found = self.format_for_extension(suffix) if suffix else None
        if found is None:
            known = ", ".join(f".{ext}" for ext in sorted(self.extensions))
            raise BackendError(
                f"the extension of {Path(path).name} names no known format; use one of {known}",
                origin=Origin.file(str(path)),
            )
        return found

    def store(self, name: str) -> StoreType:
        try:
            return self.stores[name]
        except KeyError:
            known = ", ".join(sorted(self.stores)) or "none installed"
            raise MissingError(
                f"no store is named `{name}`; installed stores: {known}",
            ) from None

    def _collect(self, manager: pluggy.PluginManager) -> None:
        for formats in manager.hook.dynconf_formats():
            for fmt in formats:
                self.formats[fmt.name] = fmt
                for ext in fmt.extensions:
                    self.extensions[ext.lower()] = fmt.name
        for stores in manager.hook.dynconf_stores():
            for store in stores:
                self.stores[store.name] = store
        for filters in manager.hook.dynconf_template_filters():
            self.filters.update(filters)


def _manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(DynconfHookSpecs)
    return manager


def _builtin_module() -> ModuleType:
    return importlib.import_module("dynconf.builtin")


def discover() -> Registry:
    """Load every installed plugin of the ``dynconf`` entry-point group (open mode)."""
    from importlib.metadata import entry_points

    manager = _manager()
    registry = Registry(manager=manager)
    seen_builtin = False
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        module = ep.load()
        if manager.is_registered(module):
            continue
        manager.register(module, name=ep.name)
        seen_builtin = seen_builtin or module.__name__ == "dynconf.builtin"
        dist = ep.dist
        registry.plugins.append(
            LockEntry(
                distribution=dist.name if dist else "",
                version=dist.version if dist else "",
                name=ep.name,
                value=ep.value,
            )
        )
    if not seen_builtin:
        # Running from a source tree without installed metadata: the built-ins still load.
        manager.register(_builtin_module(), name="builtin")
    registry._collect(manager)
    return registry


def load_locked(lock: PluginLock, *, origin: str = "the plugin lock") -> Registry:
    """Load exactly the plugins a lock names; refuse a missing or different distribution."""
    from importlib.metadata import PackageNotFoundError, version

    manager = _manager()
    registry = Registry(manager=manager)
    problems: list[str] = []
    for entry in lock.entries:
        try:
            installed = version(entry.distribution)
        except PackageNotFoundError:
            problems.append(
                f"{entry.distribution} {entry.version} is pinned by {origin} but not installed; "
                "install it or regenerate the lock"
            )
            continue
        if installed != entry.version:
            problems.append(
                f"{entry.distribution} is pinned at {entry.version} by {origin} but {installed} "
                "is installed; install the pinned version or regenerate the lock"
            )
            continue
        module_name = entry.value.split(":", 1)[0]
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            problems.append(
                f"the entry point {entry.name} = {entry.value} of {entry.distribution} does not "
                "import; reinstall the distribution"
            )
            continue
        manager.register(module, name=entry.name)
        registry.plugins.append(entry)
    if problems:
        raise BackendError("; ".join(problems))
    registry._collect(manager)
    return registry


def lock_from(registry: Registry) -> PluginLock:
    """The lock that pins what a (discovered) registry loaded."""
    return PluginLock(tuple(e for e in registry.plugins if e.distribution))


_process: dict[str, Registry] = {}
"""Holds the process registry under the key ``"default"`` (no module-level rebinding)."""


def default_registry() -> Registry:
    """The process's registry: locked when ``DYNCONF_PLUGIN_LOCK`` names a lock, else open."""
    registry = _process.get("default")
    if registry is None:
        lock_path = os.environ.get(LOCK_ENV)
        if lock_path:
            registry = load_locked(PluginLock.read(lock_path), origin=lock_path)
        else:
            registry = discover()
        _process["default"] = registry
    return registry


def use_registry(registry: Registry | None) -> None:
    """Install a registry as the process default (``None`` forgets it; tests use this)."""
    if registry is None:
        _process.pop("default", None)
    else:
        _process["default"] = registry


def reset_default_registry() -> None:
    """Forget the process registry so the next use discovers or locks again."""
    use_registry(None)
