"""The TOML limit scan: nesting and integer size, checked before :mod:`tomllib` runs.

``tomllib`` cannot be asked to stop early, and what it does with hostile text is costly
before any result exists to check: a dotted key of ``n`` segments costs it time and memory
in ``n²`` (100,000 segments take gigabytes), and a decimal integer of more than 4,300
digits raises ``ValueError`` from inside it. So the text is scanned first, when a quick
look finds a line of many dots, deep brackets or a long run of digits: token by token,
strings and comments skipped by regular expressions, so the scan is linear. A path past
:data:`~dynconf.limits.MAX_DEPTH` or an integer past
:data:`~dynconf.limits.MAX_INTEGER_DIGITS` is refused with a
:class:`~dynconf.errors.LimitError` naming the path as written: the table header's keys,
the dotted key, array indices. An array of tables (``[[a]]``) is named without its index.

The scan only looks for these two limits and never refuses text for any other reason;
malformed TOML is left for ``tomllib`` to report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from dynconf.errors import Origin
from dynconf.limits import (
    MAX_DEPTH,
    MAX_INTEGER_DIGITS,
    integer_text_fits,
    long_integer,
    path_fits,
    path_text,
    too_deep,
)

__all__ = ["scan", "scan_tokens"]

LABEL: Final = "TOML"

_STRINGS: Final = (
    r'''"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"{3,5}'''
    r"""|'''[^']*(?:'(?!'')[^']*)*'{3,5}"""
    r'''|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'''
    r"""|'[^'\n]*'"""
)
"""The four TOML strings (multi-line basic and literal, basic, literal), each unrolled so
that matching is linear."""
_TOKEN: Final = re.compile(
    f"(?P<string>{_STRINGS})"
    r"""|(?P<skip>\#[^\n]*|[ \t\r]+)"""
    r"""|(?P<punct>[\[\]{}=,.\n])"""
    r"""|(?P<bare>[^\s\[\]{}=,."'\#]+)"""
    r"""|(?P<other>.)""",
)
_STRING_OR_COMMENT: Final = re.compile(_STRINGS + r"|#[^\n]*")
_BRACKET: Final = re.compile(r"[\[\]{}]")
_DECIMAL: Final = re.compile(r"[+-]?[0-9_]+")
_LONG_DIGITS: Final = re.compile(f"[0-9_]{{{MAX_INTEGER_DIGITS + 1}}}")


@dataclass
class _Frame:
    """An open inline table (``{``) or array (``[``), with the path of what it holds."""

    kind: str
    base: list[str | int]
    index: int = 0


@dataclass
class _State:
    origin: Origin
    header: list[str | int] = field(default_factory=list)
    frames: list[_Frame] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    value_path: list[str | int] = field(default_factory=list)
    in_key: bool = True
    in_header: bool = False

    def key_base(self) -> list[str | int]:
        if self.in_header:
            return []
        return self.frames[-1].base if self.frames else self.header

    def element_path(self) -> list[str | int]:
        if self.frames and self.frames[-1].kind == "[":
            frame = self.frames[-1]
            return [*frame.base, frame.index]
        return self.value_path

    def add_part(self, token: str) -> None:
        self.parts.append(token)
        if not path_fits(len(self.key_base()) + len(self.parts)):
            raise too_deep(LABEL, [*self.key_base(), *_names(self.parts)], self.origin)

    def check_element(self) -> None:
        """Refuse a value (scalar, array or inline table) whose path is past the limit.

        Counted as :func:`~dynconf.limits.check_document` counts, by the value's path: an
        array at the limit may be written empty, only an element in it is too deep.
        """
        path = self.element_path()
        if not path_fits(len(path)):
            raise too_deep(LABEL, path, self.origin)

    def open_frame(self, kind: str) -> None:
        self.check_element()
        base = self.element_path()
        self.frames.append(_Frame(kind, base))
        self.in_key = kind == "{"
        self.parts = []


def _names(parts: list[str]) -> list[str | int]:
    """Key tokens as the names they spell (quoted keys unquoted and unescaped)."""
    import tomllib  # only when a refusal names a path (see dynconf.formats.toml_)

    names: list[str | int] = []
    for part in parts:
        if part[:1] in "\"'":
            try:
                names.append(str(tomllib.loads(f"k = {part}")["k"]))
            except tomllib.TOMLDecodeError:
                names.append(part)
        else:
            names.append(part)
    return names


def _suspect(text: str) -> bool:
    """Whether the text could hold either hazard; most documents are cleared here in C.

    A dotted key sits on one line, so one past the limit needs a line of
    ``MAX_DEPTH`` dots; an overlong integer needs a run of that many digits; brackets
    nested ``MAX_DEPTH`` deep (strings and comments aside) are where ``tomllib`` could meet
    Python's recursion limit before the check after parsing could name the path.
    """
    if _LONG_DIGITS.search(text):
        return True
    if text.count(".") >= MAX_DEPTH and any(
        line.count(".") >= MAX_DEPTH for line in text.split("\n")
    ):
        return True
    if text.count("[") + text.count("{") < MAX_DEPTH:
        return False
    depth = 0
    for match in _BRACKET.finditer(_STRING_OR_COMMENT.sub("", text)):
        depth = depth + 1 if match.group() in "[{" else max(depth - 1, 0)
        if depth >= MAX_DEPTH:
            return True
    return False


def scan(text: str, origin: Origin) -> None:
    """Refuse ``text`` when a path in it nests past the limit or an integer is too long."""
    if _suspect(text):
        scan_tokens(text, origin)


def scan_tokens(text: str, origin: Origin) -> None:
    """:func:`scan` without the quick look: every token of the text."""
    state = _State(origin)
    end = len(text)
    for match in _TOKEN.finditer(text):
        group = match.lastgroup
        token = match.group()
        if group == "skip":
            continue
        if group in {"string", "bare", "other"}:
            if state.in_key or state.in_header:
                state.add_part(token)
                continue
            state.check_element()
            if group == "bare" and _DECIMAL.fullmatch(token):
                after = match.end()
                before = match.start() - 1
                dotted = (after < end and text[after] == ".") or (
                    before >= 0 and text[before] == "."
                )
                digits = token.lstrip("+-").replace("_", "")
                if not dotted and not integer_text_fits(digits):
                    raise long_integer(LABEL, path_text(state.element_path()), origin)
            continue
        _punct(state, token)


def _punct(state: _State, mark: str) -> None:
    frames = state.frames
    if mark == "[":
        if state.in_key and not frames:
            # a table header, or the second bracket of an array-of-tables header
            state.in_header = True
            state.parts = []
        elif not state.in_key:
            state.open_frame("[")
    elif mark == "]":
        if state.in_header:
            state.header = [*_names(state.parts)]
            state.in_header = False
            state.parts = []
        elif frames and frames[-1].kind == "[":
            frames.pop()
    elif mark == "{":
        if not state.in_key:
            state.open_frame("{")
    elif mark == "}":
        if frames and frames[-1].kind == "{":
            frames.pop()
            state.in_key = False
    elif mark == "=":
        if state.in_key:
            state.value_path = [*state.key_base(), *_names(state.parts)]
            state.in_key = False
            state.parts = []
    elif mark == ",":
        if frames and frames[-1].kind == "[":
            frames[-1].index += 1
        elif frames and frames[-1].kind == "{":
            state.in_key = True
            state.parts = []
    elif mark == "\n" and not frames:
        state.in_key = True
        state.in_header = False
        state.parts = []
