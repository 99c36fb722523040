"""What the diagnostics answer, as data: ``check()``, ``snapshot()`` and ``changed_paths``.

Every object here reports paths, origins and kinds. The one that holds values,
:class:`Snapshot`, shows only its shape in ``repr`` (a repr lands in logs by accident);
its values come out through :meth:`Snapshot.to_dict` when the caller asks.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from dynconf.document import Document, deep_copy, has_path, leaf_paths, walk_leaves
from dynconf.errors import Origin

__all__ = [
    "Change",
    "FieldError",
    "Report",
    "ResolvedLeaf",
    "Snapshot",
    "UnknownKey",
    "changed_paths",
    "unknown_keys",
]


@dataclass(frozen=True, slots=True)
class Change:
    """One path that differs between two snapshots (``added``, ``removed``, ``changed``)."""

    path: str
    kind: str

    def __str__(self) -> str:
        return f"{self.path} {self.kind}"


def changed_paths(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Change]:
    """Leaf paths that moved between two resolved sections, sorted; values never reported."""
    before = dict(walk_leaves(old or {}))
    after = dict(walk_leaves(new))
    changes: list[Change] = []
    for path in sorted(before.keys() | after.keys()):
        if path not in before:
            changes.append(Change(path, "added"))
        elif path not in after:
            changes.append(Change(path, "removed"))
        elif type(before[path]) is not type(after[path]) or before[path] != after[path]:
            changes.append(Change(path, "changed"))
    return changes


@dataclass(frozen=True, slots=True)
class ResolvedLeaf:
    """One resolved leaf path and the layer that supplied it."""

    path: str
    origin: Origin | None


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key the sources supply that the model does not declare, with a near name if any."""

    path: str
    suggestion: str | None = None

    def __str__(self) -> str:
        hint = f"; did you mean `{self.suggestion}`?" if self.suggestion else ""
        return f"{self.path}: the model declares no such key{hint}"


@dataclass(frozen=True, slots=True)
class FieldError:
    """One field the model refused: its dotted path, the validator's message (never the
    input) and the layer that supplied the value, when one did."""

    path: str
    message: str
    origin: Origin | None = None

    def __str__(self) -> str:
        where = f" ({self.origin})" if self.origin is not None else ""
        return f"{self.path or '(the section)'}: {self.message}{where}"


@dataclass(frozen=True, slots=True)
class Report:
    """Whether the sources would load now, and what they would supply (``check()``).

    ``failure`` is the refusal's one-line message (value-free, like every error here) or
    ``None``; ``unknown_checked`` is ``False`` for an untyped configuration, where an empty
    ``unknown`` would otherwise read as an all-clear. ``field_errors`` lists every field
    the model refused (the failure message names only the first).
    """

    key: str
    resolved: tuple[ResolvedLeaf, ...]
    unknown: tuple[UnknownKey, ...]
    failure: str | None
    failure_kind: str | None = None
    failure_path: str | None = None
    unknown_checked: bool = True
    field_errors: tuple[FieldError, ...] = ()

    @property
    def would_load(self) -> bool:
        return self.failure is None

    @property
    def is_clean(self) -> bool:
        return self.failure is None and not self.unknown

    def __str__(self) -> str:
        lines = [f"[{self.key}]"]
        lines.extend(f"  {leaf.path:<28} {leaf.origin}" for leaf in self.resolved)
        if not self.resolved:
            lines.append("  (nothing supplies this section)")
        lines.extend(f"  {unknown}" for unknown in self.unknown)
        lines.extend(f"  refused {error}" for error in self.field_errors)
        if not self.unknown_checked:
            lines.append("  unknown keys: not checked (no model)")
        lines.append(
            "  would load" if self.failure is None else f"  would not load: {self.failure}"
        )
        return "\n".join(lines)


class Snapshot:
    """One installed generation's resolved section and provenance, without the model."""

    __slots__ = ("_origins", "_section", "generation", "reason")

    def __init__(
        self, section: Document, origins: Mapping[str, Origin], generation: int, reason: str
    ) -> None:
        self._section = section
        self._origins = dict(origins)
        self.generation = generation
        self.reason = reason

    def to_dict(self) -> Document:
        """The resolved values as plain data (a copy: editing it changes nothing)."""
        return typing.cast(Document, deep_copy(self._section))

    def leaf_paths(self) -> list[str]:
        return leaf_paths(self._section)

    def top_level_keys(self) -> list[str]:
        return sorted(self._section)

    def contains(self, path: str) -> bool:
        return has_path(self._section, path)

    def is_empty(self) -> bool:
        return not self._section

    def source_of(self, path: str) -> Origin | None:
        return self._origins.get(path)

    def diff(self, other: Snapshot) -> list[Change]:
        """Paths that moved from this snapshot to ``other``; paths, never values."""
        return changed_paths(self._section, other._section)

    def __repr__(self) -> str:
        return f"<Snapshot generation={self.generation} leaves={len(self.leaf_paths())}>"


# ---------------------------------------------------------------------------- unknown keys
_OPEN = None
"""A declared field under which any key is accepted (a mapping, ``Any``, an untyped dict)."""


def _declared(model: Any) -> dict[str, Any] | None:
    """The tree of names ``model`` declares; ``None`` for a type that accepts any key."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        tree: dict[str, Any] = {}
        for name, info in model.model_fields.items():
            sub = _nested(info.annotation)
            for spelling in {
                name,
                *(a for a in (info.alias, info.validation_alias) if isinstance(a, str)),
            }:
                tree[spelling] = sub
        return tree
    if dataclasses.is_dataclass(model) and isinstance(model, type):
        try:
            hints = typing.get_type_hints(model)
        except Exception:
            hints = {}
        return {f.name: _nested(hints.get(f.name)) for f in dataclasses.fields(model)}
    return _OPEN


def _nested(annotation: Any) -> dict[str, Any] | bool | None:
    """A field's subtree: a model's names, ``None`` (open) or ``False`` (a scalar leaf)."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and (
            issubclass(candidate, BaseModel) or dataclasses.is_dataclass(candidate)
        ):
            return _declared(candidate)
    origin = typing.get_origin(annotation) or annotation
    if origin is Any or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return _OPEN
    if any(typing.get_origin(a) is dict or a is dict for a in typing.get_args(annotation)):
        return _OPEN
    return False


def unknown_keys(model: Any, section: Document) -> list[UnknownKey] | None:
    """Paths in ``section`` that ``model`` does not declare; ``None`` when it cannot say."""
    tree = _declared(model) if model is not None else _OPEN
    if tree is _OPEN:
        return None
    found: list[UnknownKey] = []
    _walk(tree, section, "", found)
    return sorted(found, key=lambda unknown: unknown.path)


def _walk(
    tree: dict[str, Any], table: Mapping[str, Any], prefix: str, found: list[UnknownKey]
) -> None:
    for key, value in table.items():
        path = f"{prefix}{key}"
        if key not in tree:
            near = difflib.get_close_matches(key, list(tree), n=1, cutoff=0.6)
            found.append(UnknownKey(path, f"{prefix}{near[0]}" if near else None))
            continue
        sub = tree[key]
        if isinstance(sub, dict) and isinstance(value, Mapping):
            _walk(sub, value, f"{path}.", found)
