"""The ``dynconf resolve SPEC.json`` spec: a JSON object describing one load.

Fields (every other field is refused, naming it and the known ones):

``key`` (string, required)
    the section to resolve.
``env_prefix`` / ``profile_env`` (string)
    the environment prefix (variables are ``{prefix}{KEY}_…``) and the profile variable.
``defaults`` (object)
    the defaults layer, as a tree.
``set`` (object)
    the flags layer. Nested objects are walked into dotted paths; a string leaf is typed by
    the text grammar exactly as ``--set path=value`` would be (``"8080"`` becomes ``8080``),
    any other JSON leaf keeps its JSON type. An empty object contributes nothing.
``overrides`` (object)
    the overrides layer, walked like ``set`` but never text-typed.
``secrets_dir`` (string), ``env_files`` (list of strings)
    the secrets directory and the ``.env`` files, in order.
``aliases`` (object ``{old: canonical}``)
    aliases, added in the object's order.
``whole_document`` (bool, default false)
    read each whole document as the section.
``files`` (list of strings, default ``["config.toml"]``)
    the listed files, in order.
``extra_missing_file`` (string)
    one more listed file after ``files`` (the conformance runners use it for a file that
    does not exist).

dynconf extensions (not in the engine's runner): ``bindings`` (object ``{path: VARIABLE}``),
``strict_env`` and ``allow_empty_env`` (bool), ``nest`` (string, default ``"__"``).

Relative paths are relative to the spec's directory. The environment is the process's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from dynconf.document import Document, Value, walk_leaves
from dynconf.errors import (
    InvalidError,
    IoError,
    MissingError,
    Origin,
    ParseError,
    TypeMismatchError,
)
from dynconf.plugins import Registry
from dynconf.resolve import LoadSpec, resolve
from dynconf.text import type_text

__all__ = [
    "SPEC_FIELDS",
    "load_spec",
    "load_spec_file",
    "render_resolved_json",
    "resolve_spec_file",
]

SPEC_FIELDS: Final = (
    "key",
    "env_prefix",
    "profile_env",
    "defaults",
    "set",
    "overrides",
    "secrets_dir",
    "env_files",
    "aliases",
    "whole_document",
    "files",
    "extra_missing_file",
    "bindings",
    "strict_env",
    "allow_empty_env",
    "nest",
)
_DEFAULT_FILES: Final = ("config.toml",)


def load_spec_file(path: Path) -> LoadSpec:
    """Read a spec file into a :class:`~dynconf.resolve.LoadSpec` (paths made absolute)."""
    origin = Origin.file(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingError(
            f"the spec file {path} does not exist; name an existing file", origin=origin
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or type(error).__name__
        raise IoError(
            f"the spec file {path} cannot be read ({reason}); check the file", origin=origin
        ) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseError(
            f"the spec is not valid JSON at line {error.lineno}, column {error.colno}; fix the "
            "JSON syntax",
            origin=origin,
        ) from None
    return load_spec(raw, base=path.parent, origin=origin)


def load_spec(raw: Value, *, base: Path, origin: Origin | None = None) -> LoadSpec:
    """Validate a parsed spec object; relative paths are taken relative to ``base``."""
    if not isinstance(raw, dict):
        raise TypeMismatchError(
            "the spec must be a JSON object with at least a `key` field", origin=origin
        )
    unknown = [name for name in raw if name not in SPEC_FIELDS]
    if unknown:
        raise InvalidError(
            f"the spec field `{unknown[0]}` is unknown; the known fields are "
            + ", ".join(SPEC_FIELDS),
            path=unknown[0],
            origin=origin,
        )
    fields = _Fields(raw, origin)
    spec = LoadSpec(key=fields.required_string("key"))
    spec.env_prefix = fields.string("env_prefix")
    spec.profile_env = fields.string("profile_env")
    spec.whole_document = fields.boolean("whole_document")
    spec.strict_env = fields.boolean("strict_env")
    spec.allow_empty_env = fields.boolean("allow_empty_env")
    nest = fields.string("nest")
    if nest is not None:
        spec.set_nest(nest)
    for path, variable in (fields.table("bindings") or {}).items():
        if not isinstance(variable, str):
            raise fields.wrong("bindings", "an object of path to variable name")
        spec.bind(path, variable)
    defaults = fields.table("defaults")
    if defaults:
        spec.defaults = defaults
    spec.set_flags(
        {
            path: type_text(value) if isinstance(value, str) else value
            for path, value in _flatten(fields.table("set")).items()
        }
    )
    for path, value in _flatten(fields.table("overrides")).items():
        spec.set_override(path, value)
    secrets_dir = fields.string("secrets_dir")
    if secrets_dir is not None:
        spec.secrets_dir = base / secrets_dir
    spec.env_files = [base / name for name in fields.strings("env_files") or []]
    files = fields.strings("files")
    spec.files = [base / name for name in (_DEFAULT_FILES if files is None else files)]
    extra = fields.string("extra_missing_file")
    if extra is not None:
        spec.files.append(base / extra)
    for old, canonical in (fields.table("aliases") or {}).items():
        if not isinstance(canonical, str):
            raise TypeMismatchError(
                f"the spec field `aliases` maps `{old}` to something other than a string; "
                'write {"old.path": "canonical.path"}',
                path="aliases",
                origin=origin,
            )
        spec.add_alias(old, canonical)
    return spec


def resolve_spec_file(path: Path, *, registry: Registry | None = None) -> Document:
    """Resolve the load a spec file describes and answer the section."""
    return resolve(load_spec_file(path), registry=registry).section


def render_resolved_json(document: Document) -> str:
    """The resolved section as JSON: sorted keys, two-space indent, trailing newline."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _flatten(table: Mapping[str, Value] | None) -> dict[str, Value]:
    """Nested objects → dotted paths; an empty object contributes nothing."""
    if not table:
        return {}
    return {path: value for path, value in walk_leaves(table) if value != {}}


class _Fields:
    """Typed access to spec fields; a wrong type names the field and the expected type."""

    def __init__(self, raw: dict[str, Value], origin: Origin | None) -> None:
        self.raw = raw
        self.origin = origin

    def wrong(self, name: str, expected: str) -> TypeMismatchError:
        return TypeMismatchError(
            f"the spec field `{name}` must be {expected}; change its value to {expected}",
            path=name,
            origin=self.origin,
        )

    def required_string(self, name: str) -> str:
        if name not in self.raw:
            raise MissingError(
                f"the spec has no `{name}` field; add it (a string)",
                path=name,
                origin=self.origin,
            )
        value = self.raw[name]
        if not isinstance(value, str):
            raise self.wrong(name, "a string")
        return value

    def string(self, name: str) -> str | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.wrong(name, "a string")
        return value

    def boolean(self, name: str) -> bool:
        value = self.raw.get(name, False)
        if not isinstance(value, bool):
            raise self.wrong(name, "true or false")
        return value

    def table(self, name: str) -> dict[str, Value] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.wrong(name, "a JSON object")
        return value

    def strings(self, name: str) -> list[str] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.wrong(name, "a list of strings")
        return value
