"""What the flat formats (INI, properties, env) share.

Flat formats have no arrays, no null and, for INI and properties, no types: every scalar
is text that the reader *widens* (``"…"`` verbatim, then ``true``/``false``, then a
64-bit integer, then a 64-bit float, else the string). INI and ``.env`` promise that what
they write reads back through our own parser as the same document, type for type, so a
string that would widen is written quoted. A ``.properties`` file is written for Java
instead (see :mod:`dynconf.formats.properties`). Anything a format cannot spell (an array,
a null, a key the syntax cannot carry) is refused by path with a
:class:`~dynconf.errors.TypeMismatchError`, never silently changed.

Readers refuse a key of more than :data:`~dynconf.limits.MAX_DEPTH` segments before
building any of it, and walk nothing recursively.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from dynconf.document import Document, Value, same_value
from dynconf.errors import Origin, ParseError, TypeMismatchError
from dynconf.formats._common import I64_MAX, I64_MIN, child, refuse_foreign, shown
from dynconf.limits import path_fits, too_deep

WHITESPACE: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Unicode ``White_Space``: what the reference's ``trim`` removes (Python's ``strip``
also removes U+001C..U+001F, which would make our reader disagree with theirs)."""

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(
    r"[+-]?(?:(?i:inf|infinity|nan)|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)


def trim(text: str) -> str:
    return text.strip(WHITESPACE)


def lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` split on LF only, a CR before it dropped.

    ``str.splitlines`` would also split on form feed, NEL and U+2028, which can sit
    inside a value.
    """
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")


def widen(raw: str) -> Value:
    """The typed value of a flat-format scalar (INI and properties rules, §2.2)."""
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        return raw[1:-1]
    if raw == "true":
        return True
    if raw == "false":
        return False
    # past 19 significant digits the text is outside the 64-bit range (and int() of a
    # long one raises), so it goes on to the float rule, as in the reference
    significant = raw.lstrip("+-").lstrip("0")
    if _INT.fullmatch(raw) and len(significant) <= 19:
        number = int(significant or "0") * (-1 if raw[0] == "-" else 1)
        if I64_MIN <= number <= I64_MAX:
            return number
    if _FLOAT.fullmatch(raw):
        return float(raw)
    return raw


def parse_error(label: str, line: int, reason: str, origin: Origin) -> ParseError:
    return ParseError(f"{label} parse error at line {line}: {reason}", origin=origin)


def insert(
    tree: Document,
    segments: list[str],
    value: Value,
    *,
    label: str,
    line: int,
    origin: Origin,
) -> None:
    """Put ``value`` at ``segments``; a key that is both a value and a table is an error.

    A repeated leaf takes the later value; two tables at one path merge.
    """
    check_depth(segments, label=label, origin=origin)
    pending = [(segments, value)]
    while pending:
        here, item = pending.pop()
        node = open_table(tree, here[:-1], label=label, line=line, origin=origin)
        key = here[-1]
        below = node.get(key)
        if key not in node:
            node[key] = item
        elif isinstance(below, dict) and isinstance(item, dict):
            merged = [([*here, sub_key], sub_value) for sub_key, sub_value in item.items()]
            pending.extend(reversed(merged))
        elif isinstance(below, dict) or isinstance(item, dict):
            raise _collision(label, line, here, origin)
        else:
            node[key] = item


def check_depth(segments: list[str], *, label: str, origin: Origin) -> None:
    """Refuse a key of more than :data:`~dynconf.limits.MAX_DEPTH` segments, by path."""
    if not path_fits(len(segments)):
        raise too_deep(label, segments, origin)


def open_table(
    tree: Document, segments: list[str], *, label: str, line: int, origin: Origin
) -> Document:
    """The table at ``segments``, created on the way; a value in the way is an error."""
    check_depth(segments, label=label, origin=origin)
    node = tree
    for depth, segment in enumerate(segments):
        below = node.setdefault(segment, {})
        if not isinstance(below, dict):
            raise _collision(label, line, segments[: depth + 1], origin)
        node = below
    return node


def _collision(label: str, line: int, segments: list[str], origin: Origin) -> ParseError:
    path = shown(".".join(segments))
    return parse_error(
        label, line, f"`{path}` is both a value and a table; rename one of them", origin
    )


def refuse(path: str, message: str) -> TypeMismatchError:
    return TypeMismatchError(f"`{shown(path)}` {message}", path=path)


def array_refusal(path: str) -> TypeMismatchError:
    return refuse(
        path,
        "is an array, and neither flat format has one; render to json, toml or yaml instead",
    )


def leaves(
    document: Document, label: str, *, keep_empty_tables: bool
) -> Iterator[tuple[list[str], Value]]:
    """``(key segments, value)`` for every leaf, refusing what no flat format can hold.

    An empty table is yielded as a leaf when the format can spell one, else refused.
    """
    refuse_foreign(document, label)
    stack: list[tuple[list[str], str, Iterator[tuple[str, Value]]]] = [
        ([], "", iter(document.items()))
    ]
    while stack:
        segments, prefix, items = stack[-1]
        for key, value in items:
            path = child(prefix, key)
            here = [*segments, key]
            if isinstance(value, list):
                raise array_refusal(path)
            if value is None:
                raise refuse(
                    path,
                    f"is null, and {label} has no spelling for null; remove the key or render "
                    "to json or yaml instead",
                )
            if isinstance(value, dict) and value:
                stack.append((here, path, iter(value.items())))
                break
            if isinstance(value, dict) and not keep_empty_tables:
                raise refuse(
                    path,
                    f"is an empty table, and {label} has no spelling for one; remove the key "
                    "or render to json, toml or yaml instead",
                )
            yield here, value
        else:
            stack.pop()


def check_widened_integer(value: int, path: str, label: str) -> None:
    """Refuse, by path, an integer :func:`widen` would read back as a float.

    Widening keeps only 64-bit integers; written bare, anything wider comes back as a
    float, so INI and properties refuse it rather than write a different document.
    """
    if not I64_MIN <= value <= I64_MAX:
        raise refuse(
            path,
            f"is an integer outside the 64-bit range, which {label} reads back as a "
            "float; store it as a string or render to json, toml or yaml instead",
        )


def widened_text(value: Value, path: str, label: str, *, trims: bool) -> str:
    """The text of a scalar that :func:`widen` reads back as the same value.

    Strings that would widen to something else, or lose surrounding whitespace when the
    reader ``trims``, are wrapped in double quotes, which the reader strips verbatim (an
    inner ``"`` needs no escape). Callers refuse what their line syntax cannot carry
    (line breaks) before calling.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        check_widened_integer(value, path, label)
        return str(value)
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if trims and trim(text) != text:
        return f'"{text}"'
    return text if same_value(widen(text), text) else f'"{text}"'
