"""JSON Schema checks for a resolved document, before anything is published.

This is the door for consumers that have no typed binding (a Java service reading a
``.properties`` file, a daemon reading YAML): a ``port: "abc"`` is refused here instead of
one restart after the bad file was written.

The draft comes from the schema's ``$schema`` (2020-12 when it names none); ``format`` is an
annotation, as those drafts define it. References resolve inside the schema only — nothing
is fetched. A violation message names instance paths and schema paths, never a value, and
lists at most five; the full value-free report is on :attr:`InvalidError.errors`.

Schemas are re-read at every render (the caller calls :func:`load_schema` each time), so
tightening one needs no rollout; compiling is cached by content, so re-reading is cheap.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml
from jsonschema import Draft202012Validator, SchemaError
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from dynconf.document import Document, canonical_json, join_path
from dynconf.errors import InvalidError, IoError, Origin, ParseError

__all__ = ["MAX_REPORTED", "check_schema", "load_schema"]

MAX_REPORTED: Final = 5
"""How many violations the message lists; the rest are counted."""

_COMPILED_KEEP: Final = 32


class _UnknownDraft:
    """Sentinel validator class for a ``$schema`` that names no draft we know."""


def load_schema(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a schema file: YAML for ``.yaml``/``.yml``, JSON otherwise.

    Raises :class:`IoError` when the file cannot be read and :class:`ParseError` (with the
    line, never the text) when it is not a JSON/YAML object.
    """
    origin = Origin.file(str(path))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise IoError(
            "the schema file does not exist; mount it or fix the --schema path", origin=origin
        ) from None
    except UnicodeDecodeError:
        raise IoError(
            "the schema file is not UTF-8 text; save it as UTF-8", origin=origin
        ) from None
    except OSError as exc:
        raise IoError(
            f"the schema file cannot be read ({exc.strerror}); check its permissions",
            origin=origin,
        ) from None
    suffix = Path(path).suffix.lower()
    schema: object
    if suffix in (".yaml", ".yml"):
        try:
            schema = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ParseError(
                f"the schema is not valid YAML{where}; fix the schema file", origin=origin
            ) from None
    else:
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParseError(
                f"the schema is not valid JSON at line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg}; fix the schema file",
                origin=origin,
            ) from None
    if not isinstance(schema, dict):
        raise ParseError(
            "the schema file must hold one JSON Schema object at its top level", origin=origin
        )
    return schema


def _pointer(parts: Iterable[object]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def _dotted(parts: Sequence[object]) -> str:
    return join_path([str(part) for part in parts])


_compiled: OrderedDict[str, Validator] = OrderedDict()


def _validator(schema: Mapping[str, Any], origin: Origin) -> Validator:
    """The compiled validator for a schema, checked against its draft's meta-schema."""
    key = canonical_json(schema)
    found = _compiled.get(key)
    if found is not None:
        _compiled.move_to_end(key)
        return found
    cls: Any = validator_for(schema, default=Draft202012Validator)
    if "$schema" in schema:
        cls = validator_for(schema, default=_UnknownDraft)  # type: ignore[arg-type]
        if cls is _UnknownDraft:
            raise InvalidError(
                "the schema's `$schema` names no JSON Schema draft this build knows; use "
                "draft-04, -06, -07, 2019-09 or 2020-12, or leave it out for 2020-12",
                origin=origin,
            )
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = _pointer(exc.path) or "the top level"
        raise InvalidError(
            f"the schema itself is invalid: {where} does not satisfy the meta-schema rule "
            f"{_pointer(exc.absolute_schema_path)}; fix the schema file",
            origin=origin,
        ) from None
    # An explicit registry (jsonschema adds the drafts' meta-schemas to it) has no
    # retriever: a remote `$ref` is refused instead of fetched over the network.
    validator: Validator = cls(schema, registry=Registry())
    _compiled[key] = validator
    if len(_compiled) > _COMPILED_KEEP:
        _compiled.popitem(last=False)
    return validator


def _sort_key(error: ValidationError) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return (
        tuple(str(p) for p in error.absolute_path),
        tuple(str(p) for p in error.absolute_schema_path),
    )


def _describe(error: ValidationError) -> str:
    text = (
        f"{_pointer(error.absolute_path) or 'the document'} does not satisfy "
        f"{_pointer(error.absolute_schema_path)}"
    )
    required = error.validator_value
    if error.validator == "required" and isinstance(error.instance, Mapping):
        # The missing names come from the schema, not the document.
        names = required if isinstance(required, list) else []
        missing = [str(name) for name in names if name not in error.instance]
        if missing:
            text += " (" + ", ".join(f"`{name}`" for name in missing) + " missing)"
    return text


def check_schema(document: Document, schema: Mapping[str, Any], *, origin: Origin) -> None:
    """Refuse a document that does not satisfy a schema.

    ``origin`` names the schema (its file). The message reads "the document does not
    satisfy the schema: <instance path> does not satisfy <schema path>; …" with JSON
    pointers, the empty instance path spelled "the document", at most
    :data:`MAX_REPORTED` entries. ``InvalidError.path`` is the first violation's dotted
    path; ``InvalidError.errors`` lists every violation as pointers and rule names only.
    """
    validator = _validator(schema, origin)
    try:
        errors = sorted(validator.iter_errors(document), key=_sort_key)
    except Unresolvable as exc:
        raise InvalidError(
            f"the schema refers to {exc.ref!r}, which is not inside it; a schema may only "
            "refer to its own definitions, nothing is fetched",
            origin=origin,
        ) from None
    if not errors:
        return
    # One `required` rule yields an error per missing name; each describes them all.
    described = list(dict.fromkeys(_describe(e) for e in errors))
    parts = described[:MAX_REPORTED]
    more = len(described) - MAX_REPORTED
    if more > 0:
        parts.append(f"and {more} more")
    report: list[dict[str, object]] = [
        {
            "path": _dotted(list(e.absolute_path)),
            "instance_pointer": _pointer(e.absolute_path),
            "schema_pointer": _pointer(e.absolute_schema_path),
            "rule": str(e.validator),
        }
        for e in errors
    ]
    raise InvalidError(
        "the document does not satisfy the schema: " + "; ".join(parts),
        path=_dotted(list(errors[0].absolute_path)),
        origin=origin,
        errors=report,
    )
