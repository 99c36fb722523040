"""The one grammar that types text values: environment variables, ``.env`` lines, ``--set``
assignments and bindings all go through :func:`type_text`.

The grammar is the engine's (kept bug-for-bug with figment's old value reader):

* the whole input must be consumed, ASCII whitespace around it allowed; otherwise the
  result is the original string, untouched (``truex``, ``a,b``, `` truex `` stay as given);
* ``true`` / ``false`` (lowercase, exact) are booleans;
* ``[v, ...]`` is an array and ``{k=v, ...}`` a table; a trailing comma directly before
  the closing bracket and empty ``[]`` / ``{}`` are allowed. Because the reader does not
  skip whitespace before a closing bracket, ``[ ]`` is ``[""]`` and ``[a, ]`` is
  ``["a", ""]`` while ``{ }`` and ``{a=1, }`` stay strings; keys are ``[A-Za-z0-9_-]+`` or a
  quoted string; collections nest at most 64 deep, deeper input stays a string;
* ``"..."`` is a string with the escapes ``\\" \\\\ \\b \\f \\n \\r \\t \\uXXXX \\UXXXXXXXX``;
  an invalid escape or a control character (other than tab) makes the input a string;
* ``'x'`` is a one-character string;
* anything else is a bare word up to ``, { } [ ]``, trimmed: a float when it contains
  ``.`` and reads as a Rust ``f64``; else an integer when it reads as a Rust ``usize``
  (leading ``+`` allowed) or ``isize``; else the trimmed word.

Python's ``int``/``float`` accept ``_``, surrounding whitespace, ``inf`` and ``nan``; Rust's
parsers do not, so numbers are matched with exact patterns first.
"""

from __future__ import annotations

import re
from typing import Final

from dynconf.document import Value

__all__ = ["MAX_DEPTH", "type_text"]

MAX_DEPTH: Final = 64
"""Deepest collection nesting the grammar accepts; deeper input stays a string."""

_ASCII_WS: Final = " \t\n\x0c\r"
_SEPARATORS: Final = frozenset(",{}[]")
_SPECIAL_START: Final = frozenset("[{\"'")
# Rust's char::is_whitespace (the Unicode White_Space property), used by str::trim.
_RUST_WS: Final = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_FLOAT: Final = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_UINT: Final = re.compile(r"\+?[0-9]+")
_INT: Final = re.compile(r"[+-]?[0-9]+")
_U64_MAX: Final = 2**64 - 1
_I64_MIN: Final = -(2**63)
_SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


class _Fail(Exception):
    """The input is not in the grammar; the caller falls back to the raw string."""


def type_text(raw: str) -> Value:
    """Type a text value by the engine's grammar; never fails (unreadable text is returned)."""
    start = _skip_ws(raw, 0)
    if start == len(raw) or (raw[start] not in _SPECIAL_START and not _has_separator(raw)):
        # Fast path: a lone bare word (or true/false), the common environment value.
        stripped = raw.strip(_ASCII_WS)
        if stripped.startswith(("true", "false")):
            if stripped in ("true", "false"):
                return stripped == "true"
            return raw
        return _bare(raw[start:])
    reader = _Reader(raw)
    try:
        value = reader.value(0)
    except (_Fail, IndexError):
        return raw
    if reader.pos != len(raw):
        return raw
    return value


def _has_separator(text: str) -> bool:
    return any(char in _SEPARATORS for char in text)


def _skip_ws(text: str, pos: int) -> int:
    end = len(text)
    while pos < end and text[pos] in _ASCII_WS:
        pos += 1
    return pos


def _bare(word: str) -> Value:
    """A bare word: float when it has a ``.``, then usize, then isize, else the trimmed word."""
    word = word.strip(_RUST_WS)
    if "." in word and _FLOAT.fullmatch(word):
        return float(word)
    unsigned = _UINT.fullmatch(word)
    if unsigned or _INT.fullmatch(word):
        number = _integer(word)
        if number is not None and (number <= _U64_MAX if unsigned else number >= _I64_MIN):
            return number
    return word


def _integer(word: str) -> int | None:
    """The integer a signed digit string spells, or ``None`` past 20 significant digits
    (beyond any 64-bit integer; ``int()`` of a long one raises, leading zeros included)."""
    digits = word.lstrip("+-").lstrip("0")
    if len(digits) > 20:
        return None
    return -int(digits or "0") if word.startswith("-") else int(digits or "0")


class _Reader:
    """A recursive-descent reader over one input; raises :class:`_Fail` on anything else."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def value(self, depth: int) -> Value:
        text = self.text
        self.pos = _skip_ws(text, self.pos)
        pos = self.pos
        result: Value
        if text.startswith("true", pos):
            self.pos = pos + 4
            result = True
        elif text.startswith("false", pos):
            self.pos = pos + 5
            result = False
        elif pos < len(text) and text[pos] == "{":
            result = self.table(depth + 1)
        elif pos < len(text) and text[pos] == "[":
            result = self.array(depth + 1)
        elif pos < len(text) and text[pos] == '"':
            result = self.string()
        elif pos < len(text) and text[pos] == "'":
            if pos + 2 >= len(text) or text[pos + 2] != "'":
                raise _Fail
            self.pos = pos + 3
            result = text[pos + 1]
        else:
            end = pos
            limit = len(text)
            while end < limit and text[end] not in _SEPARATORS:
                end += 1
            self.pos = end
            return _bare(text[pos:end])
        self.pos = _skip_ws(text, self.pos)
        return result

    def array(self, depth: int) -> list[Value]:
        if depth > MAX_DEPTH:
            raise _Fail
        text = self.text
        self.pos += 1
        items: list[Value] = []
        while True:
            if self.pos < len(text) and text[self.pos] == "]":
                self.pos += 1
                return items
            items.append(self.value(depth))
            if self.pos < len(text) and text[self.pos] == ",":
                self.pos += 1
                continue
            if self.pos < len(text) and text[self.pos] == "]":
                self.pos += 1
                return items
            raise _Fail

    def table(self, depth: int) -> dict[str, Value]:
        if depth > MAX_DEPTH:
            raise _Fail
        text = self.text
        self.pos += 1
        items: dict[str, Value] = {}
        while True:
            if self.pos < len(text) and text[self.pos] == "}":
                self.pos += 1
                return dict(sorted(items.items()))
            key = self.key()
            if self.pos >= len(text) or text[self.pos] != "=":
                raise _Fail
            self.pos += 1
            items[key] = self.value(depth)
            if self.pos < len(text) and text[self.pos] == ",":
                self.pos += 1
                continue
            if self.pos < len(text) and text[self.pos] == "}":
                self.pos += 1
                return dict(sorted(items.items()))
            raise _Fail

    def key(self) -> str:
        text = self.text
        self.pos = _skip_ws(text, self.pos)
        if self.pos < len(text) and text[self.pos] == '"':
            key = self.string()
        else:
            start = end = self.pos
            while end < len(text) and (
                text[end].isascii() and (text[end].isalnum() or text[end] in "_-")
            ):
                end += 1
            if end == start:
                raise _Fail
            key = text[start:end]
            self.pos = end
        self.pos = _skip_ws(text, self.pos)
        return key

    def string(self) -> str:
        text = self.text
        start = self.pos + 1
        end = start
        limit = len(text)
        while end < limit:
            char = text[end]
            if char == "\\":
                end += 2
                continue
            if char == '"':
                break
            end += 1
        if end >= limit:
            raise _Fail
        self.pos = end + 1
        return _unescape(text[start:end])


def _unescape(inner: str) -> str:
    if "\\" not in inner:
        for char in inner:
            if not _allowed_in_string(char):
                raise _Fail
        return inner
    out: list[str] = []
    index = 0
    limit = len(inner)
    while index < limit:
        char = inner[index]
        if char == "\\":
            escape = inner[index + 1] if index + 1 < limit else ""
            if escape in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[escape])
                index += 2
            elif escape in ("u", "U"):
                width = 4 if escape == "u" else 8
                digits = inner[index + 2 : index + 2 + width]
                if len(digits) != width or not all(d in _HEX for d in digits):
                    raise _Fail
                code = int(digits, 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise _Fail
                out.append(chr(code))
                index += 2 + width
            else:
                raise _Fail
        elif _allowed_in_string(char):
            out.append(char)
            index += 1
        else:
            raise _Fail
    return "".join(out)


def _allowed_in_string(char: str) -> bool:
    return char == "\t" or (char >= " " and char != "\x7f")
