"""Document helpers: the value model, dotted paths, the one merge rule, canonical digests.

A *document* is a ``dict[str, Value]`` whose values are ``None``, ``bool``, ``int``,
``float``, ``str``, ``list`` or another table. Every layer, format and store speaks this
model; nothing else (no dates, no bytes) crosses a module boundary.

The merge rule is the engine's only one: tables merge key by key at every depth; anything
else (scalar, array, null) replaces what was below it whole. ``bool`` is never confused
with ``int`` (Python's ``True == 1`` is the trap), which is why comparisons here go through
:func:`same_value`.

The copy, merge, leaf walk and comparison are iterative (an explicit stack), so a deep
document costs memory in proportion to its size and never a ``RecursionError``; the
canonical JSON recurses, as ``json`` does, within the depth every parser enforces
(:data:`dynconf.limits.MAX_DEPTH`). A dotted path longer than that is refused where it is
split.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

from dynconf.errors import LimitError, TypeMismatchError
from dynconf.limits import MAX_DEPTH, shown

__all__ = [
    "Document",
    "Value",
    "canonical_json",
    "deep_copy",
    "digest",
    "deep_merge",
    "expand_paths",
    "fingerprint",
    "get_path",
    "has_path",
    "join_path",
    "leaf_paths",
    "same_value",
    "set_path",
    "split_path",
    "walk_leaves",
]

Value: TypeAlias = Any
"""A document value: None, bool, int, float, str, list[Value] or dict[str, Value]."""

Document: TypeAlias = dict[str, Any]
"""A table: the top level of every document."""


def split_path(path: str) -> list[str]:
    """Split a dotted path into segments, refusing empty segments and ``::``.

    ``""`` is the whole document and splits to ``[]``. A path of more than
    :data:`~dynconf.limits.MAX_DEPTH` segments is refused with a
    :class:`~dynconf.errors.LimitError`.
    """
    if path == "":
        return []
    if "::" in path:
        raise TypeMismatchError(
            f"the path `{path}` contains `::`; section references are only allowed as an "
            "alias source",
            path=path,
        )
    segments = path.split(".")
    if any(segment == "" for segment in segments):
        raise TypeMismatchError(
            f"the path `{path}` has an empty segment; write segments separated by single dots",
            path=path,
        )
    if len(segments) > MAX_DEPTH:
        raise LimitError(
            f"the path `{shown(path)}` has more than {MAX_DEPTH} segments, past the nesting "
            "limit; shorten it",
            path=join_path(segments[: MAX_DEPTH + 1]),
        )
    return segments


def join_path(segments: list[str] | tuple[str, ...]) -> str:
    """The dotted spelling of a list of segments."""
    return ".".join(segments)


def get_path(document: Mapping[str, Value], path: str) -> Value:
    """The value at a dotted path; ``KeyError`` when any segment is missing."""
    node: Value = document
    for segment in split_path(path):
        if not isinstance(node, Mapping) or segment not in node:
            raise KeyError(path)
        node = node[segment]
    return node


def has_path(document: Mapping[str, Value], path: str) -> bool:
    """Whether a dotted path exists in the document."""
    try:
        get_path(document, path)
    except KeyError:
        return False
    return True


def set_path(document: Document, path: str, value: Value) -> None:
    """Set a dotted path, creating tables on the way and replacing a scalar in the way."""
    segments = split_path(path)
    if not segments:
        raise TypeMismatchError("the empty path names the whole document; name a key", path=path)
    node = document
    for segment in segments[:-1]:
        child = node.get(segment)
        if not isinstance(child, dict):
            child = {}
            node[segment] = child
        node = child
    node[segments[-1]] = value


def expand_paths(flat: Mapping[str, Value]) -> Document:
    """Turn a flat ``{dotted.path: value}`` map into a tree, in sorted path order.

    A scalar in the way of a deeper path becomes a table, as runtime layers require.
    """
    tree: Document = {}
    for path in sorted(flat):
        set_path(tree, path, deep_copy(flat[path]))
    return tree


def _shallow(value: Value) -> Value:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def deep_copy(value: Value) -> Value:
    """A structural copy of a document value (tables and arrays copied, scalars shared)."""
    top = _shallow(value)
    stack = [top] if top is not value else []
    while stack:
        container = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            copied = _shallow(container[key])
            if copied is not container[key]:
                container[key] = copied
                stack.append(copied)
    return top


def deep_merge(base: Document, overlay: Mapping[str, Value]) -> Document:
    """Merge ``overlay`` over ``base`` in place and return ``base``.

    Tables merge key by key at every depth; any other overlay value replaces whole. An
    empty overlay table over a populated table changes nothing.
    """
    stack: list[tuple[Document, Mapping[str, Value]]] = [(base, overlay)]
    while stack:
        into, over = stack.pop()
        for key, value in over.items():
            below = into.get(key)
            if isinstance(value, dict) and isinstance(below, dict):
                stack.append((below, value))
            else:
                into[key] = deep_copy(value)
    return base


def walk_leaves(document: Mapping[str, Value], prefix: str = "") -> Iterator[tuple[str, Value]]:
    """Yield ``(dotted path, value)`` for every leaf, in order; an empty table is a leaf."""
    stack: list[tuple[str, Iterator[tuple[str, Value]]]] = [(prefix, iter(document.items()))]
    while stack:
        here, items = stack[-1]
        for key, value in items:
            path = f"{here}.{key}" if here else key
            if isinstance(value, dict) and value:
                stack.append((path, iter(value.items())))
                break
            yield path, value
        else:
            stack.pop()


def leaf_paths(document: Mapping[str, Value]) -> list[str]:
    """Every leaf path, sorted."""
    return sorted(path for path, _ in walk_leaves(document))


def same_value(left: Value, right: Value) -> bool:
    """Structural equality that keeps bool, int and float apart (``True != 1 != 1.0``)."""
    pending = [(left, right)]
    while pending:
        a, b = pending.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            pending.extend((a[key], b[key]) for key in a)
        elif isinstance(a, list):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif isinstance(a, float):
            if not (math.isnan(a) and math.isnan(b)) and not (
                a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
            ):
                return False
        elif a != b:
            return False
    return True


def _canonical(value: Value) -> Value:
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no spelling for these; tag them so the digest still distinguishes them.
        return {"$float": repr(value)}
    if isinstance(value, dict):
        return {str(key): _canonical(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_canonical(child) for child in value]
    return value


def canonical_json(document: Value) -> str:
    """Sorted-key, compact, UTF-8-preserving JSON: the bytes the fingerprint is taken over.

    ``1`` and ``1.0`` and ``true`` stay distinct because JSON spells them differently;
    ``-0.0`` is spelled ``-0.0``.
    """
    return json.dumps(
        _canonical(document),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def digest(data: bytes) -> str:
    """``sha256:`` + the hex digest of exactly these bytes: the one fingerprint.

    The agent's ``.meta`` file and ``POST /applied`` carry it over a rendered file's bytes,
    and :meth:`dynconf.DynamicConfig.fingerprint` over the bytes of the file it read, so an
    application acknowledges with the very string the agent published.
    """
    return "sha256:" + hashlib.sha256(data).hexdigest()


def fingerprint(document: Value) -> str:
    """:func:`digest` of the canonical JSON of a document (for a value with no file behind it)."""
    return digest(canonical_json(document).encode("utf-8"))
