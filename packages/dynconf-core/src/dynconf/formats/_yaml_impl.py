"""The PyYAML half of :mod:`dynconf.formats.yaml_`, imported at the first YAML parse or dump.

Discovery registers every built-in format, and a process that never reads or writes YAML
(an agent rendering JSON from a JSON store) must not load PyYAML to do so. The rules are
:mod:`dynconf.formats.yaml_`'s docstring.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from dynconf.document import Document, Value
from dynconf.errors import LimitError, Origin, ParseError
from dynconf.formats._common import (
    check_document,
    child,
    is_blank,
    refuse_foreign,
    require_table,
    safe_reason,
    shown,
)
from dynconf.formats.yaml_ import MAX_VALUES
from dynconf.limits import (
    LONG_INTEGER,
    integer_text_fits,
    nested_beyond_parser,
    path_fits,
    too_deep_at,
)

__all__ = ["dump", "parse"]

_BaseLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_CORE_RESOLVERS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("tag:yaml.org,2002:bool", _BOOL, "tTfF"),
    ("tag:yaml.org,2002:null", _NULL, "~nN"),
    ("tag:yaml.org,2002:int", _INT, "-+0123456789"),
    ("tag:yaml.org,2002:float", _FLOAT, "-+0123456789."),
)


class _Refused:
    """Stands in for a value the model cannot hold until its path is known."""

    def __init__(self, what: str) -> None:
        self.what = what


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The safe loader with YAML 1.2 core resolution and model-only constructors."""


_Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in _CORE_RESOLVERS:
    _Loader.add_implicit_resolver(_tag, _pattern, list(_first))
# An empty plain scalar is null in the core schema; resolvers are keyed by first char.
_Loader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, [""])


def _construct_int(loader: Any, node: yaml.ScalarNode) -> object:
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if not digits.startswith(("0o", "0x", "0b")) and not integer_text_fits(digits):
        # int() of a long decimal raises; the limit is refused once the path is known
        return LONG_INTEGER
    if digits.startswith("0o"):
        return sign * int(digits[2:], 8)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    if digits.startswith("0b"):
        return sign * int(digits[2:], 2)
    return sign * int(digits, 10)


def _construct_as_text(loader: Any, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


def _construct_refused(what: str) -> Any:
    def construct(_loader: Any, _node: yaml.Node) -> _Refused:
        return _Refused(what)

    return construct


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_as_text)
_Loader.add_constructor("tag:yaml.org,2002:binary", _construct_refused("binary data (!!binary)"))
_Loader.add_constructor("tag:yaml.org,2002:set", _construct_refused("a set (!!set)"))
_Loader.add_constructor("tag:yaml.org,2002:omap", _construct_refused("an ordered map (!!omap)"))
_Loader.add_constructor("tag:yaml.org,2002:pairs", _construct_refused("a pair list (!!pairs)"))


class _Dumper(yaml.SafeDumper):
    """The safe dumper, quoting strings that a 1.1 or a 1.2 reader would retype."""


for _tag, _pattern, _first in _CORE_RESOLVERS:
    _Dumper.add_implicit_resolver(_tag, _pattern, list(_first))

# PyYAML writes these raw in plain and single-quoted scalars, where a reader takes them
# as line breaks or a byte-order mark; its double-quoted style escapes them.
_BREAKS_IN_QUOTES = frozenset("\x85\u2028\u2029\ufeff")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if _BREAKS_IN_QUOTES.intersection(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


class _Copier:
    """Rebuilds the loaded tree so no two paths share a container, within a budget."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.count = 0
        self.ancestors: set[int] = set()

    def refuse(self, path: str, reason: str, kind: type[ParseError] = ParseError) -> ParseError:
        where = f"`{shown(path)}`" if path else "the top level"
        return kind(f"YAML document refused: {where} {reason}", path=path, origin=self.origin)

    def copy(self, value: Any, path: str, depth: int = 0) -> Value:
        if not path_fits(depth):
            raise too_deep_at("YAML", path, self.origin)
        self.count += 1
        if self.count > MAX_VALUES:
            raise self.refuse(
                path,
                f"is past the limit of {MAX_VALUES} values with aliases expanded; "
                "use fewer aliases",
                LimitError,
            )
        if isinstance(value, _Refused):
            raise self.refuse(path, f"is {value.what}, which a document cannot hold; use a string")
        if isinstance(value, dict | list):
            if id(value) in self.ancestors:
                raise self.refuse(path, "refers to itself through an alias; remove the cycle")
            self.ancestors.add(id(value))
            try:
                if isinstance(value, list):
                    return [
                        self.copy(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)
                    ]
                table: Document = {}
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise self.refuse(
                            path,
                            f"has a key that is not a string ({type(key).__name__}); quote the key",
                        )
                    table[key] = self.copy(item, child(path, key), depth + 1)
                return table
            finally:
                self.ancestors.discard(id(value))
        if value is None or value is LONG_INTEGER or isinstance(value, bool | int | float | str):
            return value
        raise self.refuse(
            path, f"is a {type(value).__name__}, which a document cannot hold; use a string"
        )


def _yaml_reason(exc: yaml.MarkedYAMLError) -> str:
    parts = [exc.problem or ""]
    if exc.context and not exc.context.startswith("while"):
        parts.insert(0, exc.context)
    return safe_reason(", ".join(part for part in parts if part))


def parse(text: str, origin: Origin) -> Document:
    """Read one YAML document whose top level is a mapping (or empty)."""
    if is_blank(text):
        return {}
    try:
        raw = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in str(exc.problem):
            raise nested_beyond_parser("YAML", origin) from None
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ParseError(f"YAML parse error{where}: {_yaml_reason(exc)}", origin=origin) from None
    except yaml.YAMLError as exc:
        raise ParseError(f"YAML parse error: {safe_reason(str(exc))}", origin=origin) from None
    except RecursionError:
        raise nested_beyond_parser("YAML", origin) from None
    except UnicodeEncodeError as exc:
        # libyaml reads UTF-8, so a lone surrogate in the text fails before any path exists
        line = text.count("\n", 0, exc.start) + 1
        raise LimitError(
            f"YAML document refused: line {line} holds a lone surrogate, which has no UTF-8 "
            "spelling; fix the text",
            origin=origin,
        ) from None
    if not isinstance(raw, dict):
        return require_table(raw, "YAML", origin)
    document: Document = _Copier(origin).copy(raw, "")
    check_document(document, "YAML", origin)
    return document


def dump(document: Document) -> str:
    """Block-style YAML in document order, UTF-8 kept, trailing newline."""
    refuse_foreign(document, "YAML")
    if not document:
        return "{}\n"
    return yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
    )
