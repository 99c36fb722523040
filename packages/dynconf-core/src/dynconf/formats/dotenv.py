"""``.env`` files (format name ``env``): one ``KEY=value`` per line, typed by the text grammar.

Reading follows the engine's dotenv rules: lines trimmed, blank lines and ``#`` lines
skipped, a leading ``export `` allowed, the split on the first ``=``, the value trimmed and
one matching pair of ``"…"`` or ``'…'`` removed, no interpolation, no multi-line values, no
inline comments. The name is ASCII-lowercased and ``__`` nests (``DB__HOST`` is
``db.host``); the value goes through :func:`dynconf.text.type_text`, so ``8080`` is an
integer and ``[a, b]`` an array. A name with an empty segment, or a key that is both a
value and a table, is an error giving the line number.

Writing: one line per leaf, the path upper-cased and joined with ``__``. A value is
written bare when it reads back as itself; otherwise a string is written as the grammar's
``"…"`` string (escapes for quotes, backslashes and control characters) inside single
quotes, which the reader strips, so ``'"8080"'`` is the string ``8080``. An empty table
is ``{}``. Arrays, null, non-finite floats, integers the grammar reads as strings, and keys
that would not read back (anything beyond lowercase ASCII letters, digits and single inner
underscores) are refused by path.
"""

from __future__ import annotations

import math
import re

from dynconf.document import Document, Value, same_value
from dynconf.errors import Origin
from dynconf.formats._common import check_document, is_blank
from dynconf.formats._flat import insert, leaves, lines, parse_error, refuse, trim
from dynconf.plugins import FormatType
from dynconf.text import type_text

__all__ = ["ENV", "dump", "parse"]

LABEL = ".env"
NEST = "__"

_EXPORT = re.compile(r"export[ \t]+")
_SEGMENT = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_U64_MAX = 2**64 - 1
_I64_MIN = -(2**63)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def parse(text: str, origin: Origin) -> Document:
    """Read a dotenv file into nested tables, values typed by the text grammar."""
    tree: Document = {}
    if is_blank(text):
        return tree
    for number, raw in lines(text):
        line = trim(raw)
        if not line or line.startswith("#"):
            continue
        export = _EXPORT.match(line)
        if export:
            line = line[export.end() :]
        name, separator, value = line.partition("=")
        if not separator:
            raise parse_error(LABEL, number, "expected `NAME=value`", origin)
        name = trim(name)
        if not name:
            raise parse_error(LABEL, number, "a name is empty; write it before `=`", origin)
        segments = [trim(segment).translate(_LOWER) for segment in name.split(NEST)]
        if any(segment == "" for segment in segments):
            raise parse_error(
                LABEL,
                number,
                "a name has an empty segment (a leading, trailing or repeated `__`)",
                origin,
            )
        typed = type_text(_unquote(trim(value)))
        insert(tree, segments, typed, label=LABEL, line=number, origin=origin)
    check_document(tree, LABEL, origin)
    return tree


def _grammar_string(text: str) -> str:
    out: list[str] = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "'\"" + "".join(out) + "\"'"


def _bare_reads_back(text: str) -> bool:
    return (
        "\n" not in text
        and "\r" not in text
        and trim(text) == text
        and _unquote(text) == text
        and same_value(type_text(text), text)
    )


def _value_text(value: Value, path: str) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not _I64_MIN <= value <= _U64_MAX:
            raise refuse(
                path,
                "is an integer outside the 64-bit range, which .env reads back as a string; "
                "store it as a string or render to json, toml or yaml instead",
            )
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise refuse(
                path,
                "is an infinite or NaN number, which .env has no spelling for; render to "
                "toml or yaml instead",
            )
        spelled = repr(value)
        if "." not in spelled:
            mantissa, _, exponent = spelled.partition("e")
            spelled = f"{mantissa}.0e{exponent}"
        return spelled
    text = str(value)
    return text if _bare_reads_back(text) else _grammar_string(text)


def _name(segments: list[str], path: str) -> str:
    for segment in segments:
        if not _SEGMENT.fullmatch(segment):
            raise refuse(
                path,
                "has a key .env cannot spell as a variable name (use lowercase ASCII letters, "
                "digits and single inner underscores); rename it or render to json, toml or "
                "yaml instead",
            )
    return NEST.join(segments).upper()


def dump(document: Document) -> str:
    """``NAME=value`` lines that :func:`parse` reads back as ``document``."""
    body: list[str] = []
    for segments, value in leaves(document, LABEL, keep_empty_tables=True):
        path = ".".join(segments)
        body.append(f"{_name(segments, path)}={_value_text(value, path)}")
    return "\n".join(body) + "\n" if body else ""


ENV = FormatType(name="env", extensions=("env",), parse=parse, dump=dump, flat=True)
