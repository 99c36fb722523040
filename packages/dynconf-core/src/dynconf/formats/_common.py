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


def shown(path: str) -> str:
    """A path as it appears inside a message: control characters spelled as escapes.

    Keys are names, not values, so messages may carry them; this keeps the message on one
    line even when a key holds a line break.
    """
    return "".join(
        f"\\u{ord(ch):04x}" if (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0) else ch for ch in path
    )


def child(prefix: str, key: str) -> str:
    """The dotted path of ``key`` under ``prefix``."""
    return f"{prefix}.{key}" if prefix else key


def walk(document: Mapping[str, Value], prefix: str = "") -> Iterator[tuple[str, Value]]:
    """Every value at every depth with its path, parents before children.

    Array elements get ``path[index]`` paths so refusals can point inside a list.
    """
    for key, value in document.items():
        path = child(prefix, key)
        yield path, value
        yield from _walk_value(value, path)


def _walk_value(value: Value, path: str) -> Iterator[tuple[str, Value]]:
    if isinstance(value, dict):
        yield from walk(value, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            item_path = f"{path}[{index}]"
            yield item_path, item
            yield from _walk_value(item, item_path)


def refuse_foreign(document: Document, format_label: str) -> None:
    """Refuse, by path, anything outside the value model and any non-string key.

    The value model is None, bool, int, float, str, list and str-keyed dict; a format's
    dump must not guess how to spell a date, bytes or a tuple.
    """
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
