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

The plugin API is versioned apart from the distribution: this core provides
:data:`PLUGIN_API_VERSION` and each plugin module declares, as the literal
``DYNCONF_PLUGIN_API = ">=1.0,<2"``, the range it was written for. The declaration sits on the
module the entry point names (not on a ``StoreType``) because one module may contribute
formats and filters as well as stores, and because it is read right after import, before any
hook runs: a plugin for another core is refused there with one sentence naming both versions
and which package to upgrade, instead of failing later inside a hook. A plugin that does not
import, does not declare, or whose hooks raise or answer nonsense is refused alone; the
others load (:attr:`Registry.refused`).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
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
    "PLUGIN_API_ATTRIBUTE",
    "PLUGIN_API_VERSION",
    "ApiRange",
    "FormatType",
    "LockEntry",
    "PluginRefusal",
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

PLUGIN_API_VERSION: Final = "1.0"
"""The plugin API this core provides: the hookspecs below, FormatType, StoreType and the store
protocols of :mod:`dynconf.stores`. The minor grows when something is added that old plugins
need not know; the major when a plugin written for the previous one could break."""
PLUGIN_API_ATTRIBUTE: Final = "DYNCONF_PLUGIN_API"
"""The plugin module's declaration of the range it was written for, e.g. ``">=1.0,<2"``."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
log = logging.getLogger("dynconf.plugins")

_CLAUSE: Final = re.compile(r"\s*(>=|<=|==|>|<)\s*(\d+(?:\.\d+)*)\s*")


def _release(text: str) -> tuple[int, ...]:
    parts = [int(part) for part in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@dataclass(frozen=True)
class ApiRange:
    """A plugin's declared plugin-API range: comma-separated ``>=``/``>``/``<=``/``<``/``==``
    clauses over dotted numbers (``">=1.0,<2"``)."""

    text: str
    clauses: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def parse(cls, text: object) -> ApiRange | None:
        """The range, or ``None`` when ``text`` is not one."""
        if not isinstance(text, str) or not text.strip():
            return None
        clauses = []
        for part in text.split(","):
            match = _CLAUSE.fullmatch(part)
            if match is None:
                return None
            clauses.append((match[1], _release(match[2])))
        return cls(text.replace(" ", ""), tuple(clauses))

    def allows(self, version: str) -> bool:
        have = _release(version)
        tests: dict[str, Callable[[tuple[int, ...], tuple[int, ...]], bool]] = {
            ">=": lambda a, b: a >= b,
            ">": lambda a, b: a > b,
            "<=": lambda a, b: a <= b,
            "<": lambda a, b: a < b,
            "==": lambda a, b: a == b,
        }
        return all(tests[op](have, bound) for op, bound in self.clauses)

    def wants_newer(self, version: str) -> bool:
        """Whether the range lies above ``version`` (so the core, not the plugin, is old)."""
        have = _release(version)
        return any(
            (op in (">=", "==") and have < bound) or (op == ">" and have <= bound)
            for op, bound in self.clauses
        )


@dataclass(frozen=True, slots=True)
class PluginRefusal:
    """A plugin that did not load, and why: one sentence that names the fix."""

    name: str
    distribution: str
    version: str
    reason: str


def _next_major() -> int:
    return int(PLUGIN_API_VERSION.split(".")[0]) + 1


def _core_version() -> str:
    from dynconf import __version__

    return __version__


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


def _label(entry: LockEntry) -> str:
    if entry.distribution:
        return f"the plugin `{entry.name}` ({entry.distribution} {entry.version})"
    return f"the plugin `{entry.name}`"


def _refuse(entry: LockEntry, reason: str) -> PluginRefusal:
    return PluginRefusal(entry.name, entry.distribution, entry.version, reason)


def api_refusal(module: ModuleType, entry: LockEntry) -> PluginRefusal | None:
    """Why ``module`` cannot load against this core's plugin API, or ``None`` when it can."""
    declared = getattr(module, PLUGIN_API_ATTRIBUTE, None)
    core = f"dynconf-core {_core_version()} provides plugin API {PLUGIN_API_VERSION}"
    owner = entry.distribution or "the plugin"
    if declared is None:
        return _refuse(
            entry,
            f"{_label(entry)} declares no plugin API range and {core}; declare the range "
            f"it was written for in {module.__name__} "
            f'({PLUGIN_API_ATTRIBUTE} = ">={PLUGIN_API_VERSION},<{_next_major()}"), '
            f"or upgrade {owner}",
        )
    wanted = ApiRange.parse(declared)
    if wanted is None:
        return _refuse(
            entry,
            f"{_label(entry)} declares a plugin API range that is not one ({PLUGIN_API_ATTRIBUTE}"
            f' must read like ">=1.0,<2"); fix {module.__name__} or upgrade {owner}',
        )
    if wanted.allows(PLUGIN_API_VERSION):
        return None
    if wanted.wants_newer(PLUGIN_API_VERSION):
        fix = f"upgrade dynconf-core to a release that provides plugin API {wanted.text}"
    else:
        fix = f"upgrade {owner} to a release written for plugin API {PLUGIN_API_VERSION}"
    return _refuse(
        entry, f"{_label(entry)} was written for plugin API {wanted.text} but {core}; {fix}"
    )


def _import_refusal(entry: LockEntry, error: BaseException) -> PluginRefusal:
    # the exception's type only: its text is the plugin's own and could quote anything
    owner = entry.distribution or "the plugin"
    return _refuse(
        entry,
        f"{_label(entry)} does not import ({type(error).__name__}) with dynconf-core "
        f"{_core_version()}; reinstall {owner}, or upgrade it to a release written for plugin "
        f"API {PLUGIN_API_VERSION}",
    )


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
    refused: list[PluginRefusal] = field(default_factory=list)
    """Plugins that did not load (another plugin API, no import, a failing hook), and why."""
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
            refusal = self.refusal_for(name)
            if refusal is not None:
                raise MissingError(f"no store is named `{name}`: {refusal.reason}") from None
            known = ", ".join(sorted(self.stores)) or "none installed"
            raise MissingError(
                f"no store is named `{name}`; installed stores: {known}",
            ) from None

    def refusal_for(self, name: str) -> PluginRefusal | None:
        """Why the plugin whose entry point is ``name`` (by convention, the store it adds)
        did not load; ``None`` when it was not refused."""
        return next((r for r in self.refused if r.name == name), None)

    def refuse(self, refusal: PluginRefusal) -> None:
        """Record a plugin that does not load; the others go on loading."""
        self.refused.append(refusal)
        log.warning(
            "plugin_refused",
            extra={
                "plugin": refusal.name,
                "distribution": refusal.distribution,
                "reason": refusal.reason,
            },
        )

    def _collect(self, manager: pluggy.PluginManager) -> None:
        """Take each plugin's contributions, refusing alone one whose hook raises or answers
        something that is not what the hookspec promises."""
        entries = {e.name: e for e in self.plugins}
        answers: dict[str, list[tuple[str, Any]]] = {hook: [] for hook in _HOOKS}
        failed: dict[str, PluginRefusal] = {}
        for hook, check in _HOOKS.items():
            # pluggy's own order (last registered first), so precedence is what it always was
            for impl in reversed(getattr(manager.hook, hook).get_hookimpls()):
                name = impl.plugin_name
                if name in failed:
                    continue
                entry = entries.get(name) or LockEntry("", "", name, "")
                try:
                    raw = impl.function()
                    if raw is None:  # pluggy drops a None answer: it contributes nothing
                        continue
                    answer = check(raw)
                except Exception as error:
                    failed[name] = _refuse(
                        entry,
                        f"{_label(entry)} answered {hook} with "
                        f"{type(error).__name__}; upgrade {entry.distribution or 'the plugin'} "
                        f"to a release written for plugin API {PLUGIN_API_VERSION}",
                    )
                    continue
                answers[hook].append((name, answer))
        for name, refusal in failed.items():
            self.refuse(refusal)
            self.plugins = [e for e in self.plugins if e.name != name]
            plugin = manager.get_plugin(name)
            if plugin is not None:
                manager.unregister(plugin)
        for name, formats in answers["dynconf_formats"]:
            if name in failed:
                continue
            for fmt in formats:
                self.formats[fmt.name] = fmt
                for ext in fmt.extensions:
                    self.extensions[ext.lower()] = fmt.name
        for name, stores in answers["dynconf_stores"]:
            if name not in failed:
                for store in stores:
                    self.stores[store.name] = store
        for name, filters in answers["dynconf_template_filters"]:
            if name not in failed:
                self.filters.update(filters)


def _formats_answer(answer: object) -> list[FormatType]:
    formats: list[FormatType] = list(answer)  # type: ignore[call-overload]
    if not all(isinstance(fmt, FormatType) for fmt in formats):
        raise TypeError("not a FormatType")
    return formats


def _stores_answer(answer: object) -> list[StoreType]:
    stores: list[StoreType] = list(answer)  # type: ignore[call-overload]
    for store in stores:
        if not isinstance(getattr(store, "name", None), str) or not callable(
            getattr(store, "build", None)
        ):
            raise TypeError("not a StoreType")
    return stores


def _filters_answer(answer: object) -> dict[str, Callable[..., Any]]:
    filters: dict[str, Callable[..., Any]] = dict(answer)  # type: ignore[call-overload]
    if not all(isinstance(k, str) and callable(v) for k, v in filters.items()):
        raise TypeError("not a mapping of names to functions")
    return filters


_HOOKS: Final[dict[str, Callable[[object], Any]]] = {
    "dynconf_formats": _formats_answer,
    "dynconf_stores": _stores_answer,
    "dynconf_template_filters": _filters_answer,
}


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
        dist = ep.dist
        entry = LockEntry(
            distribution=dist.name if dist else "",
            version=dist.version if dist else "",
            name=ep.name,
            value=ep.value,
        )
        try:
            module = ep.load()
        except Exception as error:  # a plugin's import is its own code: refuse it alone
            registry.refuse(_import_refusal(entry, error))
            continue
        if manager.is_registered(module):
            continue
        refusal = api_refusal(module, entry)
        if refusal is not None:
            registry.refuse(refusal)
            continue
        manager.register(module, name=ep.name)
        seen_builtin = seen_builtin or module.__name__ == "dynconf.builtin"
        registry.plugins.append(entry)
    if not seen_builtin:
        # Running from a source tree without installed metadata: the built-ins still load.
        manager.register(_builtin_module(), name="builtin")
    registry._collect(manager)
    return registry


_DIST_INFO: Final = ".dist-info"


def _dist_info_versions() -> dict[str, str]:
    """Each distribution's version from the first ``<name>-<version>.dist-info`` directory on
    ``sys.path`` (the one :mod:`importlib.metadata` would read), keyed by normalised name.

    A locked start checks a dozen pins; :mod:`importlib.metadata` (with the ``email`` parser
    under it) costs the init agent more than its whole plugin load, for versions that the
    wheels' directory names already spell. One listing per path entry, for every pin.
    """
    import sys

    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith(_DIST_INFO):
                continue
            project, _, version = name[: -len(_DIST_INFO)].rpartition("-")
            if project and version:
                found.setdefault(_normalised(project), version)
    return found


def _normalised(distribution: str) -> str:
    return re.sub(r"[-_.]+", "_", distribution).lower()


def load_locked(lock: PluginLock, *, origin: str = "the plugin lock") -> Registry:
    """Load exactly the plugins a lock names; refuse a missing or different distribution."""
    manager = _manager()
    registry = Registry(manager=manager)
    problems: list[str] = []
    wheels = _dist_info_versions()
    for entry in lock.entries:
        try:
            installed = wheels.get(_normalised(entry.distribution)) or _metadata_version(
                entry.distribution
            )
        except LookupError:
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
        except Exception as error:
            problems.append(_import_refusal(entry, error).reason)
            continue
        refusal = api_refusal(module, entry)
        if refusal is not None:
            problems.append(refusal.reason)
            continue
        manager.register(module, name=entry.name)
        registry.plugins.append(entry)
    if not problems:
        registry._collect(manager)
        problems.extend(refusal.reason for refusal in registry.refused)
    if problems:
        # a lock is a promise: a process started with one loads all of it or refuses to start
        raise BackendError("; ".join(problems))
    return registry


def _metadata_version(distribution: str) -> str:
    """:func:`importlib.metadata.version`; ``LookupError`` when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        raise LookupError(distribution) from None


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
