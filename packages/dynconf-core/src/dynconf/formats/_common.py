"""What every built-in format shares: blank text, the top-level table, safe messages.

Parsers promise two things whatever the format: blank text is the empty table, and an
error message never carries document text. Third-party libraries sometimes quote a
fragment of the input in their messages, so their reasons pass through
:func:`safe_reason` before they reach a :class:`~dynconf.errors.ParseError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from dynconf.document import Document, Value
from dynconf.errors import Origin, ParseError, TypeMismatchError
from dynconf.limits import check_document, shown

__all__ = [
    "I64_MAX",
    "I64_MIN",
    "check_document",
    "child",
    "is_blank",
    "refuse_foreign",
    "require_table",
    "safe_reason",
    "shown",
    "walk",
]

I64_MIN: Final = -(2**63)
I64_MAX: Final = 2**63 - 1

_QUOTED = re.compile(r"""'[^']*'|"[^"]*"|`[^`]*`""")
_GRAMMAR = re.compile(r"""^['"`](?:<[a-z ]+>|[][{}(),:=?|>'"-]{1,3})['"`]$""")
_SPACES = re.compile(r"\s+")


def is_blank(text: str) -> bool:
    """Whether the text holds nothing but whitespace (and so parses to ``{}``)."""
    return not text.strip()


def require_table(value: Value, format_label: str, origin: Origin) -> Document:
    """The parsed top level, refused unless it is a table (``None`` counts as empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(
            f"the top level of a {format_label} document must be a table (a mapping of keys "
            "to values); wrap the content in a key",
            origin=origin,
        )
    return value


def safe_reason(reason: str) -> str:
    """A library's error reason with quoted fragments (possibly document text) removed.

    Token names such as ``'<scalar>'`` and expected punctuation such as ``','`` are kept:
    they describe the grammar, not the input. The result is one line and starts
    lower-case so it reads after a colon.
    """
    cleaned = _QUOTED.sub(_keep_grammar, reason)
    cleaned = _SPACES.sub(" ", cleaned).strip().rstrip(",:;")
    if not cleaned:
        return "the text is not valid"
    return cleaned[0].lower() + cleaned[1:]


def _keep_grammar(match: re.Match[str]) -> str:
    fragment = match.group(0)
    return fragment if _GRAMMAR.match(fragment) else ""


def child(prefix: str, key: str) -> str:
    """The dotted path of ``key`` under ``prefix``."""
    return f"{prefix}.{key}" if prefix else key


def walk(document: Mapping[str, Value], prefix: str = "") -> Iterator[tuple[str, Value]]:
    """Every value at every depth with its path, parents before children, in order.

    Array elements get ``path[index]`` paths so refusals can point inside a list. The walk
    is iterative, so no nesting makes it raise ``RecursionError``.
    """
    stack: list[Iterator[tuple[str, Value]]] = [_children(document, prefix)]
    while stack:
        for path, value in stack[-1]:
            yield path, value
            if isinstance(value, dict | list) and value:
                stack.append(_children(value, path))
                break
        else:
            stack.pop()


def _children(value: Mapping[str, Value] | list[Value], path: str) -> Iterator[tuple[str, Value]]:
    if isinstance(value, list):
        return ((f"{path}[{index}]", item) for index, item in enumerate(value))
    return ((child(path, key), item) for key, item in value.items())


def refuse_foreign(document: Document, format_label: str) -> None:
    """Refuse, by path, anything outside the value model or past :mod:`dynconf.limits`.

    The value model is None, bool, int, float, str, list and str-keyed dict; a format's
    dump must not guess how to spell a date, bytes or a tuple. Every dump calls this
    first, so a document built in Python meets the parse-time limits too.
    """
    check_document(document, format_label)
    _check_keys(document, "", format_label)
    for path, value in walk(document):
        if isinstance(value, dict):
            _check_keys(value, path, format_label)
        elif value is not None and not isinstance(value, bool | int | float | str | list):
            raise TypeMismatchError(
                f"`{shown(path)}` holds a {type(value).__name__}, which is not a document value; "
                f"convert it to a string, number, boolean, list or table before writing "
                f"{format_label}",
                path=path,
            )


def _check_keys(table: Mapping[Any, Value], path: str, format_label: str) -> None:
    for key in table:
        if not isinstance(key, str):
            where = f"`{shown(path)}`" if path else "the top level"
            raise TypeMismatchError(
                f"{where} has a {type(key).__name__} key, and {format_label} keys are strings; "
                "convert the key to a string",
                path=path,
            )
