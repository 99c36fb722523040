"""Java-style ``.properties``, read as UTF-8, over the flat-format widening rules (§2.2).

Reading: a line ending in an odd number of ``\\`` continues on the next (whose leading
whitespace is dropped); ``#`` and ``!`` start comment lines; key and value split at the
first unescaped ``=`` or ``:``; the key is trimmed, the value loses its leading
whitespace only; escapes ``\\t \\n \\r \\uXXXX`` (a ``\\u`` surrogate pair is the one
character it spells, a lone surrogate is refused by path), any other ``\\x`` is ``x``, and
a lone trailing ``\\`` stays. Dotted keys nest; collisions are errors naming the keys.
Values then widen: ``5432`` reads back as a number, ``"x"`` as ``x``.

Writing is for Java, whose ``java.util.Properties.load`` keeps every value a string: each
leaf is written as the text Java must see, escaped as ``Properties.store`` escapes it, and
nothing is quoted (``port = 5432`` for the string ``"5432"``, which Java reads as
``"5432"``). ``\\``, ``=``, ``:``, ``#`` and ``!`` are escaped everywhere, a space in a key
or at the start of a value is ``\\ ``, tab and line breaks are ``\\t \\n \\r``, and every
other character outside printable ASCII (form feed, control characters, anything past
``~``, astral characters as their UTF-16 surrogate pair) is ``\\uXXXX``, so the file is
ASCII and reads the same as ISO-8859-1 (``load(InputStream)``) or UTF-8
(``load(Reader)``). A boolean is ``true``/``false``, a number its shortest spelling.

Because our own reader widens, the round trip through it is what Java preserves, not the
typed document: a string ``"5432"`` comes back as the integer 5432, ``"\\"x\\""`` as
``x``. :func:`load_strings` reads a file the way Java sees it. Arrays, null, empty tables
and key segments holding ``.`` are refused by path, and so is an integer outside the
64-bit range (our reader would widen it to a float, as it does for INI).
"""

from __future__ import annotations

from collections.abc import Iterator

from dynconf.document import Document, Value
from dynconf.errors import Origin
from dynconf.formats._common import check_document, is_blank
from dynconf.formats._flat import (
    WHITESPACE,
    check_widened_integer,
    insert,
    leaves,
    lines,
    parse_error,
    refuse,
    widen,
)
from dynconf.plugins import FormatType

__all__ = ["PROPERTIES", "dump", "java_text", "load_strings", "parse"]

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
        escape = raw[index + 1]
        if escape == "u":
            digits = raw[index + 2 : index + 6]
            if len(digits) != 4 or not set(digits) <= _HEX:
                raise parse_error(
                    LABEL, line, "a `\\u` escape needs four hexadecimal digits", origin
                )
            code = int(digits, 16)
            index += 6
            low = _low_surrogate(raw, index) if 0xD800 <= code <= 0xDBFF else None
            if low is not None:
                # a UTF-16 pair, as Java writes a character past U+FFFF
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                index += 6
            out.append((chr(code), True))
        else:
            out.append((_SIMPLE_ESCAPES.get(escape, escape), True))
            index += 2
    return out


def _low_surrogate(raw: str, index: int) -> int | None:
    """The low surrogate a ``\\uDCxx`` escape at ``index`` spells, if one is there."""
    digits = raw[index + 2 : index + 6]
    if not raw.startswith("\\u", index) or len(digits) != 4 or not set(digits) <= _HEX:
        return None
    code = int(digits, 16)
    return code if 0xDC00 <= code <= 0xDFFF else None


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


def _entries(text: str, origin: Origin) -> Iterator[tuple[int, list[str], str]]:
    """``(line, key segments, unescaped value)`` for every entry, in file order."""
    for number, line in _logical_lines(text):
        parts = _split(line)
        if parts is None:
            raise parse_error(LABEL, number, "expected `key = value` (or `key: value`)", origin)
        raw_key, raw_value = parts
        segments = _key_segments(raw_key, number, origin)
        value = "".join(char for char, _ in _unescape(raw_value.lstrip(WHITESPACE), number, origin))
        yield number, segments, value


def parse(text: str, origin: Origin) -> Document:
    """Read a properties document into nested tables with widened scalars."""
    tree: Document = {}
    if is_blank(text):
        return tree
    for number, segments, value in _entries(text, origin):
        insert(tree, segments, widen(value), label=LABEL, line=number, origin=origin)
    check_document(tree, LABEL, origin)
    return tree


def load_strings(text: str, origin: Origin) -> dict[str, str]:
    """Every full key and its string, unwidened: the file as ``Properties.load`` sees it.

    A repeated key takes the later value, as in Java.
    """
    return {".".join(segments): value for _, segments, value in _entries(text, origin)}


def _escape(text: str, *, key: bool) -> str:
    """``text`` escaped as ``Properties.store(OutputStream)`` escapes it (``saveConvert``).

    The one difference: a form feed is ``\\u000C``, not ``\\f``, which our reader (like the
    reference's) would read as ``f``.
    """
    out: list[str] = []
    for index, char in enumerate(text):
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char == " ":
            out.append("\\ " if key or index == 0 else " ")
        elif char in _SHORT:
            out.append(_SHORT[char])
        elif char in "=:#!":
            out.append("\\" + char)
        elif 0x20 <= code <= 0x7E:
            out.append(char)
        elif code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
        else:
            out.append(f"\\u{code:04X}")
    return "".join(out)


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_key(key: str) -> str:
    """A key spelled so Java and our reader both read it back as ``key``."""
    return _escape(key, key=True)


def escape_value(text: str) -> str:
    """A value spelled so Java and our reader both unescape it back to ``text``."""
    return _escape(text, key=False)


def java_text(value: Value) -> str:
    """The string Java reads for a leaf: the string itself, or a scalar's spelling."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _line(segments: list[str], value: Value) -> str:
    path = ".".join(segments)
    for segment in segments:
        if segment == "" or "." in segment:
            raise refuse(
                path,
                "has an empty key or a key holding `.`, which properties reads as nesting; "
                "rename it or render to json, toml or yaml instead",
            )
    if isinstance(value, int) and not isinstance(value, bool):
        check_widened_integer(value, path, LABEL)
    text = escape_value(java_text(value))
    return f"{escape_key(path)} = {text}" if text else f"{escape_key(path)} ="


def dump(document: Document) -> str:
    """``a.b = value`` lines that Java's ``Properties.load`` reads as the leaves' text."""
    body = [
        _line(segments, value)
        for segments, value in leaves(document, LABEL, keep_empty_tables=False)
    ]
    return "\n".join(body) + "\n" if body else ""


PROPERTIES = FormatType(
    name="properties",
    extensions=("properties",),
    parse=parse,
    dump=dump,
    flat=True,
    discovery_rank=50,
)
