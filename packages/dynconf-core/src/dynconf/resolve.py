"""Layered resolution: what a load reads, in which order, and what won (engine-contract §1).

:func:`resolve` turns a :class:`LoadSpec` into a :class:`Resolved`. The layer order is API,
lowest to highest: defaults, discovered files, listed files (each followed directly by its
profile variant), the last fetched remote document, the secrets dir (one layer per file),
``.env`` files, the prefixed environment, bindings, flags, overrides. The layers are folded
with the one merge rule of :func:`dynconf.document.deep_merge`, then aliases fill gaps.

Resolution does no store I/O, converts no units, drops no unknown keys and never types a
secret. Provenance is not computed on the hot path: :attr:`Resolved.origins` replays the
fold with recording the first time a diagnostic asks for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Final

from dynconf.document import (
    Document,
    Value,
    deep_copy,
    deep_merge,
    digest,
    expand_paths,
    get_path,
    has_path,
    set_path,
    split_path,
    walk_leaves,
)
from dynconf.errors import Origin, TypeMismatchError
from dynconf.layers import (
    Contribution,
    EnvMatcher,
    InlineSource,
    RemoteDocument,
    expand_home,
    parse_document,
    profile_from_env,
    profile_variant,
    read_dotenv,
    read_secrets_dir,
    read_text_file,
    section_of,
)
from dynconf.plugins import Registry, default_registry
from dynconf.text import type_text

__all__ = [
    "MASK",
    "Contribution",
    "Explanation",
    "InlineSource",
    "LoadSpec",
    "RemoteDocument",
    "Resolved",
    "Supply",
    "check_alias",
    "check_layer_path",
    "parse_assignments",
    "resolve",
]

MASK: Final = "***"
"""What :meth:`Resolved.explain` shows in place of a secret value."""

_SECTION_REF: Final = "::"


@dataclass
class LoadSpec:
    """Everything one load reads. Runtime layers are flat ``{dotted.path: value}`` maps.

    ``environ`` is ``None`` for the process environment, read when :func:`resolve` runs.
    """

    key: str
    files: list[Path | InlineSource] = field(default_factory=list)
    discover: list[tuple[str, list[Path]]] = field(default_factory=list)
    remote: RemoteDocument | None = None
    secrets_dir: Path | None = None
    allow_external_symlinks: bool = False
    env_files: list[Path] = field(default_factory=list)
    env_prefix: str | None = None
    nest: str = "__"
    allow_empty_env: bool = False
    strict_env: bool = False
    bindings: dict[str, str] = field(default_factory=dict)
    defaults: Document = field(default_factory=dict)
    flags: dict[str, Value] = field(default_factory=dict)
    overrides: dict[str, Value] = field(default_factory=dict)
    aliases: list[tuple[str, str]] = field(default_factory=list)
    profile_env: str | None = None
    whole_document: bool = False
    environ: Mapping[str, str] | None = None
    cached: Document | None = None
    """A last-known-good section (:mod:`dynconf.cache`), the bottom layer of a recovery."""

    # The validated setters: every front end that builds a load (``dynconf resolve``'s spec,
    # ``DynamicConfig``'s builder, ``from_settings``) writes through these, so a bad path or
    # alias is one refusal, raised by the call that added it, whichever front end it was.

    def set_flags(self, values: Mapping[str, Value]) -> None:
        """Add flags; every path is checked before any is added."""
        for path in values:
            check_layer_path(path)
        self.flags.update(values)

    def set_assignments(self, assignments: Iterable[str]) -> None:
        """Add ``path=value`` flags, each value typed by the text grammar (all or none)."""
        self.flags.update(parse_assignments(assignments))

    def set_override(self, path: str, value: Value) -> None:
        check_layer_path(path)
        self.overrides[path] = value

    def set_default(self, path: str, value: Value) -> None:
        set_path(self.defaults, path, value)

    def bind(self, path: str, variable: str) -> None:
        """Read ``path`` from ``variable``; binding a path again replaces its binding."""
        check_layer_path(path)
        self.bindings[path] = variable

    def set_nest(self, separator: str) -> None:
        if not separator:
            raise TypeMismatchError(
                "the nesting separator cannot be empty; leave it out for the default `__`",
                path="nest",
            )
        self.nest = separator

    def add_alias(self, old: str, new: str) -> None:
        """Read ``old`` (or ``section::path``) as ``new`` when nothing supplies ``new``.

        A malformed path or an alias that would close a cycle is refused here, at add time.
        """
        check_alias(self.aliases, old, new)
        self.aliases.append((old, new))


def check_layer_path(path: str) -> None:
    """Refuse a runtime-layer path that is empty, has an empty segment or contains ``::``."""
    if not path:
        raise TypeMismatchError(
            "a runtime layer needs a path; name a dotted path such as `db.port`", path=""
        )
    split_path(path)


def parse_assignments(assignments: Iterable[str]) -> dict[str, Value]:
    """``["a.b=v", ...]`` → ``{"a.b": typed v}``, split on the first ``=``."""
    flags: dict[str, Value] = {}
    for index, assignment in enumerate(assignments):
        path, equals, raw = assignment.partition("=")
        if not equals:
            raise TypeMismatchError(
                f"assignment #{index + 1} has no `=`; write it as `path=value`",
                path=path if "=" not in path else "",
            )
        path = path.strip()
        check_layer_path(path)
        flags[path] = type_text(raw)
    return flags


def check_alias(existing: Iterable[tuple[str, str]], old: str, new: str) -> None:
    """Refuse a malformed alias, or one that closes a cycle with ``existing``."""
    if not split_path(new):
        raise TypeMismatchError("an alias needs a destination path; name one", path=new)
    if _SECTION_REF in old:
        section, _, rest = old.partition(_SECTION_REF)
        if not section or "." in section or not rest:
            raise TypeMismatchError(
                f"the alias source `{old}` must be `section::path` with a plain section name",
                path=old,
            )
        split_path(rest)
        return
    if not split_path(old):
        raise TypeMismatchError("an alias needs a source path; name one", path=old)
    successors: dict[str, list[str]] = {}
    for source, destination in existing:
        successors.setdefault(source, []).append(destination)
    pending, seen = [new], set()
    while pending:
        current = pending.pop()
        if current == old:
            raise TypeMismatchError(
                f"the alias `{old}` → `{new}` closes a cycle of aliases; remove one of them",
                path=new,
            )
        if current not in seen:
            seen.add(current)
            pending.extend(successors.get(current, ()))


@dataclass(frozen=True, slots=True)
class Supply:
    """One layer that supplied a path: its name, origin and value (``***`` for secrets)."""

    layer: str
    origin: Origin
    value: Value


@dataclass(frozen=True, slots=True)
class Explanation:
    """How a path got its value: every supplying layer, lowest to highest, and the winner.

    ``absent`` lists the layers consulted that did not supply the path (the environment
    layer is always consulted when a prefix is set). ``alias_of`` names the path an alias
    copied the value from.
    """

    path: str
    found: bool
    value: Value
    origin: Origin | None
    supplied: tuple[Supply, ...]
    absent: tuple[tuple[str, Origin], ...]
    alias_of: str | None = None

    def __str__(self) -> str:
        if not self.found:
            lines = [f"{self.path} is not set"]
        else:
            lines = [f"{self.path} = {_show(self.value)} ({self.origin})"]
        if self.alias_of is not None:
            lines.append(f"  copied by an alias from {self.alias_of}")
        lines.extend(
            f"  {supply.layer}: {_show(supply.value)} ({supply.origin})" for supply in self.supplied
        )
        lines.extend(f"  {layer}: not set ({origin})" for layer, origin in self.absent)
        return "\n".join(lines)


def _show(value: Value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class _AliasCopy:
    source: str
    section: str | None
    destination: str


class Resolved:
    """The outcome of one load: the section, the layers behind it, and their provenance."""

    def __init__(
        self,
        section: Document,
        layers: list[Contribution],
        *,
        documents: list[tuple[Origin, Document]],
        copies: list[_AliasCopy],
        files: list[Path],
        dirs: list[Path],
        digests: list[str] | None = None,
    ) -> None:
        self.section = section
        self.digests = digests or []
        """:func:`~dynconf.document.digest` of each document's text, in precedence order."""
        self.layers = layers
        self._documents = documents
        self._copies = copies
        self._files = files
        self._dirs = dirs

    def __repr__(self) -> str:
        names = ", ".join(layer.layer for layer in self.layers)
        return f"Resolved(keys={sorted(self.section)!r}, layers=[{names}])"

    @cached_property
    def siblings(self) -> dict[str, Document]:
        """The other sections of the same documents (files and remote), folded."""
        merged: Document = {}
        for _, siblings in self._documents:
            deep_merge(merged, siblings)
        return merged

    @cached_property
    def _sibling_origins(self) -> dict[str, Origin]:
        shadow: Document = {}
        origins: dict[str, Origin] = {}
        for origin, siblings in self._documents:
            _record(shadow, siblings, "", Contribution("file", origin, siblings).origin_at, origins)
        return origins

    @cached_property
    def origins(self) -> dict[str, Origin]:
        """Leaf path → origin of the winning value (env origins name the exact variable)."""
        shadow: Document = {}
        recorded: dict[str, Origin] = {}
        for layer in self.layers:
            _record(shadow, layer.table, "", layer.origin_at, recorded)
        for copy in self._copies:
            value = get_path(self.section, copy.destination)
            sources = self._sibling_origins if copy.section is not None else recorded
            base = f"{copy.section}.{copy.source}" if copy.section is not None else copy.source
            for suffix in _suffixes(value):
                found = sources.get(base + suffix)
                if found is not None:
                    recorded[copy.destination + suffix] = found
        return {path: recorded[path] for path, _ in walk_leaves(self.section) if path in recorded}

    def source_of(self, path: str) -> Origin | None:
        """The origin of the value at a leaf path; ``None`` when unset or a populated table."""
        return self.origins.get(path)

    def explain(self, path: str, secrets: Collection[str] = ()) -> Explanation:
        """Every layer that supplied ``path``, lowest to highest, secrets masked as ``***``."""
        split_path(path)
        supplied: list[Supply] = []
        absent: list[tuple[str, Origin]] = []
        for layer in self.layers:
            try:
                value = get_path(layer.table, path)
            except KeyError:
                absent.append((layer.layer, layer.origin))
                continue
            supplied.append(Supply(layer.layer, layer.origin_at(path), _mask(value, path, secrets)))
        try:
            final = get_path(self.section, path)
        except KeyError:
            return Explanation(path, False, None, None, tuple(supplied), tuple(absent))
        alias_of = None
        for copy in self._copies:
            if copy.destination == path or path.startswith(copy.destination + "."):
                prefix = f"{copy.section}::" if copy.section is not None else ""
                alias_of = prefix + copy.source + path[len(copy.destination) :]
        origin = self.source_of(path)
        if origin is None and supplied:
            origin = supplied[-1].origin
        return Explanation(
            path,
            True,
            _mask(final, path, secrets),
            origin,
            tuple(supplied),
            tuple(absent),
            alias_of,
        )

    def watched_files(self) -> list[Path]:
        """Files whose change should trigger a reload: listed, variants, discovered, ``.env``."""
        return list(self._files)

    def watched_dirs(self) -> list[Path]:
        """Directories a watcher should cover: discovery dirs and the secrets dir."""
        return list(self._dirs)


def _suffixes(value: Value) -> list[str]:
    if isinstance(value, dict) and value:
        return ["." + path for path, _ in walk_leaves(value)]
    return [""]


def _record(
    base: Document,
    overlay: Mapping[str, Value],
    prefix: str,
    origin_at: Callable[[str], Origin],
    origins: dict[str, Origin],
) -> None:
    """The fold again, noting the origin of every leaf as it is won."""
    for key, value in overlay.items():
        path = prefix + key
        below = base.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            if value:
                _record(below, value, path + ".", origin_at, origins)
            elif not below:
                origins[path] = origin_at(path)
            continue
        base[key] = deep_copy(value)
        if isinstance(value, dict) and value:
            for leaf, _ in walk_leaves(value, path):
                origins[leaf] = origin_at(leaf)
        else:
            origins[path] = origin_at(path)


def _mask(value: Value, path: str, secrets: Collection[str]) -> Value:
    if not secrets:
        return value
    probe = path
    while True:
        if probe in secrets:
            return MASK
        cut = probe.rfind(".")
        if cut < 0:
            break
        probe = probe[:cut]
    if isinstance(value, dict):
        return {key: _mask(child, f"{path}.{key}", secrets) for key, child in value.items()}
    return value


class _Loader:
    """One load in progress: reads every source into contributions, in the API order."""

    def __init__(self, spec: LoadSpec, registry: Registry | None) -> None:
        self.spec = spec
        self._registry = registry
        self.environ: Mapping[str, str] = os.environ if spec.environ is None else spec.environ
        self.layers: list[Contribution] = []
        self.documents: list[tuple[Origin, Document]] = []
        self.files: list[Path] = []
        self.dirs: list[Path] = []
        self.digests: list[str] = []
        self._siblings: Document | None = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = default_registry()
        return self._registry

    def add(self, layer: str, origin: Origin, table: Document) -> None:
        self.layers.append(Contribution(layer, origin, table))

    def document(self, layer: str, origin: Origin, text: str, format_name: str | None) -> None:
        if format_name is None:
            fmt = self.registry.format_for_path(origin.name)
        else:
            fmt = self.registry.format_named(format_name)
        parsed = parse_document(text, fmt, origin)
        # UTF-8 decoding is exact, so these are the bytes of the file (or the store's text)
        self.digests.append(digest(text.encode("utf-8", "surrogatepass")))
        cut = section_of(parsed, self.spec.key, self.spec.whole_document, origin)
        if cut.siblings:
            self.documents.append((origin, cut.siblings))
        if cut.section is not None:
            self.add(layer, origin, cut.section)

    def file_with_variant(self, layer: str, path: Path, profile: str | None) -> bool:
        """Layer a file then its profile variant; ``False`` when the base file is missing."""
        self.files.append(path)
        text = read_text_file(path)
        if text is not None:
            self.document(layer, Origin.file(str(path)), text, None)
        variant = profile_variant(path, profile) if profile else None
        if variant is not None:
            self.files.append(variant)
            variant_text = read_text_file(variant)
            if variant_text is not None:
                self.document(layer, Origin.file(str(variant)), variant_text, None)
        return text is not None

    def run(self) -> Resolved:
        spec = self.spec
        profile = profile_from_env(spec.profile_env, self.environ)
        if spec.cached is not None:
            self.add("cached", Origin.runtime("cached configuration"), deep_copy(spec.cached))
        if spec.defaults:
            self.add("default", Origin.runtime("default"), deep_copy(spec.defaults))
        for name, directories in spec.discover:
            for directory in directories:
                expanded = expand_home(directory, self.environ)
                if expanded is None:
                    continue
                self.dirs.append(expanded)
                for extension in self.registry.discovery_extensions():
                    candidate = expanded / f"{name}.{extension}"
                    if candidate.is_file():
                        self.file_with_variant("discovered", candidate, profile)
                        break
        for source in spec.files:
            if isinstance(source, InlineSource):
                self.document("file", Origin.inline(), source.text, source.format)
            else:
                self.file_with_variant("file", source, profile)
        if spec.remote is not None:
            remote = spec.remote
            self.document("remote", Origin.remote(remote.description), remote.text, remote.format)
        if spec.secrets_dir is not None:
            self.dirs.append(spec.secrets_dir)
            for file, segments, text in read_secrets_dir(
                spec.secrets_dir, spec.nest, spec.allow_external_symlinks
            ):
                table: Document = {}
                node = table
                for segment in segments[:-1]:
                    node = node.setdefault(segment, {})
                node[segments[-1]] = text
                self.add("secrets", Origin.file(str(file)), table)
        self.env_layers()
        flags = spec.flags
        if flags:
            self.add("flag", Origin.runtime("command-line flag"), expand_paths(flags))
        if spec.overrides:
            self.add("override", Origin.runtime("override"), expand_paths(spec.overrides))
        section = _fold(self.layers)
        copies = _apply_aliases(section, spec.aliases, self.layers, self._sibling_lookup)
        return Resolved(
            section,
            self.layers,
            documents=self.documents,
            copies=copies,
            files=self.files,
            dirs=self.dirs,
            digests=self.digests,
        )

    def env_layers(self) -> None:
        spec = self.spec
        dotenv: list[tuple[Path, list[tuple[str, str, int]]]] = []
        for path in spec.env_files:
            self.files.append(path)
            entries = read_dotenv(path)
            if entries is not None:
                dotenv.append((path, entries))
        if spec.env_prefix is not None:
            matcher = EnvMatcher(
                spec.env_prefix,
                spec.key,
                spec.nest,
                allow_empty=spec.allow_empty_env,
                strict=spec.strict_env,
            )
            for path, entries in dotenv:
                origin = Origin.file(str(path))
                found: list[tuple[list[str], Value, str]] = []
                for name, raw, _ in entries:
                    segments = matcher.segments(name)
                    if segments is None:
                        continue
                    present, value = matcher.typed(name, raw, origin)
                    if present:
                        found.append((segments, value, name))
                table, _ = matcher.build(found)
                self.add(".env", origin, table)
            found = []
            for name, raw in self.environ.items():
                segments = matcher.segments(name)
                if segments is None:
                    continue
                present, value = matcher.typed(name, raw, Origin.env(name.strip()))
                if present:
                    found.append((segments, value, name.strip()))
            table, variables = matcher.build(found)
            self.layers.append(
                Contribution("environment", Origin.env(matcher.pattern), table, variables)
            )
        for path_text, variable in spec.bindings.items():
            self.binding(path_text, variable, dotenv)

    def binding(
        self,
        path_text: str,
        variable: str,
        dotenv: list[tuple[Path, list[tuple[str, str, int]]]],
    ) -> None:
        segments = split_path(path_text)
        if not segments:
            raise TypeMismatchError("a binding needs a path; name one", path=path_text)
        spec = self.spec
        matcher = EnvMatcher(
            "", "", spec.nest, allow_empty=spec.allow_empty_env, strict=spec.strict_env
        )
        candidates: list[tuple[str, Origin]] = []
        raw = self.environ.get(variable)
        if raw is not None:
            candidates.append((raw, Origin.env(variable)))
        for path, entries in reversed(dotenv):
            for name, value, _ in reversed(entries):
                if name == variable:
                    candidates.append((value, Origin.file(str(path))))
                    break
        for raw_value, origin in candidates:
            present, typed = matcher.typed(variable, raw_value, origin)
            if present:
                table: Document = {}
                node = table
                for segment in segments[:-1]:
                    node = node.setdefault(segment, {})
                node[segments[-1]] = typed
                self.add("binding", origin, table)
                return

    def _sibling_lookup(self, section: str, path: str) -> tuple[bool, Value]:
        if self._siblings is None:
            self._siblings = {}
            for _, siblings in self.documents:
                deep_merge(self._siblings, siblings)
        table = self._siblings.get(section)
        if not isinstance(table, dict):
            return False, None
        try:
            return True, get_path(table, path)
        except KeyError:
            return False, None


def _fold(layers: list[Contribution]) -> Document:
    """Fold contributions lowest to highest; a single one is used as-is (copied)."""
    if len(layers) == 1:
        copied: Document = deep_copy(layers[0].table)
        return copied
    result: Document = {}
    for layer in layers:
        deep_merge(result, layer.table)
    return result


def _alias_order(aliases: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Aliases in path order, each after any alias that fills its source (chains)."""
    ordered = sorted(aliases, key=lambda alias: alias[0])
    by_destination: dict[str, list[tuple[str, str]]] = {}
    for alias in ordered:
        by_destination.setdefault(alias[1], []).append(alias)
    result: list[tuple[str, str]] = []
    placed: set[tuple[str, str]] = set()

    def place(alias: tuple[str, str]) -> None:
        if alias in placed:
            return
        placed.add(alias)
        for feeder in by_destination.get(alias[0], ()):
            place(feeder)
        result.append(alias)

    for alias in ordered:
        place(alias)
    return result


def _apply_aliases(
    section: Document,
    aliases: list[tuple[str, str]],
    layers: list[Contribution],
    sibling_lookup: Callable[[str, str], tuple[bool, Value]],
) -> list[_AliasCopy]:
    """Copy each alias source to its destination where nothing above defaults supplies it."""
    if not aliases:
        return []
    accepted: list[tuple[str, str]] = []
    for old, new in aliases:
        check_alias(accepted, old, new)
        accepted.append((old, new))
    copies: list[_AliasCopy] = []
    filled: set[str] = set()
    for old, new in _alias_order(aliases):
        if new in filled:
            continue
        if any(layer.layer != "default" and has_path(layer.table, new) for layer in layers):
            continue
        if _SECTION_REF in old:
            section_name, _, source = old.partition(_SECTION_REF)
            found, value = sibling_lookup(section_name, source)
            if not found:
                continue
            copy = _AliasCopy(source, section_name, new)
        else:
            try:
                value = get_path(section, old)
            except KeyError:
                continue
            copy = _AliasCopy(old, None, new)
        if not _place(section, new, deep_copy(value)):
            continue
        filled.add(new)
        copies.append(copy)
    return copies


def _place(section: Document, path: str, value: Value) -> bool:
    """Set ``path``, creating tables; refuse (``False``) to replace a scalar in the way."""
    segments = split_path(path)
    node = section
    for segment in segments[:-1]:
        child = node.get(segment)
        if child is None:
            child = {}
            node[segment] = child
        elif not isinstance(child, dict):
            return False
        node = child
    node[segments[-1]] = value
    return True


def resolve(spec: LoadSpec, *, registry: Registry | None = None) -> Resolved:
    """Read every configured source and fold them into the section (no store I/O).

    ``registry`` supplies the formats; ``None`` uses the process's plugin registry.
    """
    return _Loader(spec, registry).run()
