"""Java-style ``.properties``, read as UTF-8, over the flat-format widening rules (§2.2).

Reading: a line ending in an odd number of ``\\`` continues on the next (whose leading
whitespace is dropped); ``#`` and ``!`` start comment lines; key and value split at the
first unescaped ``=`` or ``:``; the key is trimmed, the value loses its leading
whitespace only; escapes ``\\t \\n \\r \\uXXXX``, any other ``\\x`` is ``x``, and a lone
trailing ``\\`` stays. Dotted keys nest; collisions are errors naming the keys.

Writing: ``a.b = value`` lines. Keys escape ``\\ = : # !`` and whitespace; values escape
``\\``, ``=``, ``:``, line breaks, leading whitespace and control characters, so any
string survives. A string that would widen is written ``"…"``. Arrays, null, empty
tables and key segments holding ``.`` are refused by path.
"""

from __future__ import annotations

from dynconf.document import Document, Value
from dynconf.errors import Origin
from dynconf.formats._common import is_blank
from dynconf.formats._flat import (
    WHITESPACE,
    insert,
    leaves,
    lines,
    parse_error,
    refuse,
    widen,
    widened_text,
)
from dynconf.plugins import FormatType

__all__ = ["PROPERTIES", "dump", "parse"]

LABEL = "properties"

_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _ends_in_odd_backslashes(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Comment-free logical lines, continuations joined, numbered by their first line."""
    physical = list(lines(text))
    logical: list[tuple[int, str]] = []
    index = 0
    while index < len(physical):
        number, line = physical[index]
        index += 1
        line = line.lstrip(WHITESPACE)
        if not line or line[0] in "#!":
            continue
        while _ends_in_odd_backslashes(line) and index < len(physical):
            line = line[:-1] + physical[index][1].lstrip(WHITESPACE)
            index += 1
        logical.append((number, line))
    return logical


def _unescape(raw: str, line: int, origin: Origin) -> list[tuple[str, bool]]:
    """Characters of ``raw`` with escapes resolved, each marked whether it was escaped."""
    out: list[tuple[str, bool]] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        if char != "\\" or index + 1 == len(raw):
            out.append((char, False))
            index += 1
            continue
        code = raw[index + 1]
        if code == "u":
            digits = raw[index + 2 : index + 6]
            if len(digits) != 4 or not set(digits) <= _HEX:
                raise parse_error(
                    LABEL, line, "a `\\u` escape needs four hexadecimal digits", origin
                )
            out.append((chr(int(digits, 16)), True))
            index += 6
        else:
            out.append((_SIMPLE_ESCAPES.get(code, code), True))
            index += 2
    return out


def _split(line: str) -> tuple[str, str] | None:
    index = 0
    while index < len(line):
        if line[index] == "\\":
            index += 2
        elif line[index] in "=:":
            return line[:index], line[index + 1 :]
        else:
            index += 1
    return None


def _key_segments(raw: str, line: int, origin: Origin) -> list[str]:
    chars = _unescape(raw, line, origin)
    start, end = 0, len(chars)
    while start < end and not chars[start][1] and chars[start][0] in WHITESPACE:
        start += 1
    while end > start and not chars[end - 1][1] and chars[end - 1][0] in WHITESPACE:
        end -= 1
    key = "".join(char for char, _ in chars[start:end])
    segments = key.split(".")
    if any(segment == "" for segment in segments):
        raise parse_error(
            LABEL,
            line,
            "a key is empty or has an empty segment; separate names with single dots",
            origin,
        )
    return segments


def parse(text: str, origin: Origin) -> Document:
    """Read a properties document into nested tables with widened scalars."""
    tree: Document = {}
    if is_blank(text):
        return tree
    for number, line in _logical_lines(text):
        parts = _split(line)
        if parts is None:
            raise parse_error(LABEL, number, "expected `key = value` (or `key: value`)", origin)
        raw_key, raw_value = parts
        segments = _key_segments(raw_key, number, origin)
        value = "".join(char for char, _ in _unescape(raw_value.lstrip(WHITESPACE), number, origin))
        insert(tree, segments, widen(value), label=LABEL, line=number, origin=origin)
    return tree


def _escape_char(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char in "=:#!":
        return "\\" + char
    if char == " ":
        return "\\ "
    if char in "\t\n\r":
        return "\\" + {"\t": "t", "\n": "n", "\r": "r"}[char]
    if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 or char in WHITESPACE:
        return f"\\u{ord(char):04x}"
    return char


def escape_key(key: str) -> str:
    """A key spelled so the reader splits, trims and unescapes it back to ``key``."""
    return "".join(_escape_char(char) for char in key)


def escape_value(text: str) -> str:
    """A value spelled so the reader unescapes it back to ``text``.

    Only leading whitespace needs escaping (the reader keeps the rest); separators are
    escaped anyway so the line reads unambiguously to other parsers.
    """
    out: list[str] = []
    leading = True
    for char in text:
        leading = leading and char in WHITESPACE
        if (
            char in "\\=:"
            or leading
            or (char in WHITESPACE and char != " ")
            or ord(char) < 0x20
            or 0x7F <= ord(char) < 0xA0
        ):
            out.append(_escape_char(char))
        else:
            out.append(char)
    return "".join(out)


def _line(segments: list[str], value: Value) -> str:
    path = ".".join(segments)
    for segment in segments:
        if segment == "" or "." in segment:
            raise refuse(
                path,
                "has an empty key or a key holding `.`, which properties reads as nesting; "
                "rename it or render to json, toml or yaml instead",
            )
    text = escape_value(widened_text(value, path, LABEL, trims=False))
    return f"{escape_key(path)} = {text}" if text else f"{escape_key(path)} ="


def dump(document: Document) -> str:
    """``a.b = value`` lines that :func:`parse` reads back as ``document``."""
    body = [
        _line(segments, value)
        for segments, value in leaves(document, LABEL, keep_empty_tables=False)
    ]
    return "\n".join(body) + "\n" if body else ""


PROPERTIES = FormatType(
    name="properties", extensions=("properties",), parse=parse, dump=dump, flat=True
)
