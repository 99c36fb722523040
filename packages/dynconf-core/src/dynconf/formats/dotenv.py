"""``.env`` files (format name ``env``): one ``KEY=value`` per line, typed by the text grammar.

Reading follows the engine's dotenv rules: lines trimmed, blank lines and ``#`` lines
skipped, a leading ``export `` allowed, the split on the first ``=``, the value trimmed and
one matching pair of ``"…"`` or ``'…'`` removed, no interpolation, no multi-line values, no
inline comments. The name is ASCII-lowercased and ``__`` nests (``DB__HOST`` is
``db.host``); the value goes through :func:`dynconf.text.type_text`, so ``8080`` is an
integer and ``[a, b]`` an array. A name with an empty segment, or a key that is both a
value and a table, is an error giving the line number.

Writing: one line per leaf, the path upper-cased and joined with ``__``. The file is written
for ``/bin/sh``, because env-inject sources it (``set -a; . file``): every value reaches the
shell as exactly its text and nothing in it runs. A string of shell-safe characters is written
bare; any other string as a single-quoted shell literal (a ``'`` inside is ``'\''``), which
the reader also reads. Like ``.properties``, the text is what the consumer sees, and our
typed reader then widens it by the text grammar: the string ``"8080"`` is written ``8080``
and comes back as the integer 8080. An empty table is ``{}``. Line breaks and other control
characters (a line cannot hold them), arrays, null, non-finite floats, integers the grammar
reads as strings, and keys that would not read back (anything beyond lowercase ASCII
letters, digits and single inner underscores) are refused by path.
"""

from __future__ import annotations

import math
import re

from dynconf.document import Document, Value
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
_U64_MAX = 2**64 - 1
_I64_MIN = -(2**63)


_SHELL_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_SHELL_QUOTED = re.compile(r"(?:'[^']*'|\\')+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _unquote(value: str) -> str:
    """The value without its quotes: one matching pair, or a shell literal of quoted pieces.

    ``'it'\''s'`` (the shell's way to put ``'`` in a single-quoted string, as :func:`dump`
    writes it) reads as ``it's``.
    """
    if value.startswith("'") and _SHELL_QUOTED.fullmatch(value) and "\\'" in value:
        return "".join("'" if piece == "\\'" else piece[1:-1] for piece in _pieces(value))
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _pieces(value: str) -> list[str]:
    return re.findall(r"'[^']*'|\\'", value)


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


def _shell_text(text: str, path: str) -> str:
    """``text`` as ``/bin/sh`` reads it back exactly, with nothing in it expanded or run."""
    if _CONTROL.search(text):
        raise refuse(
            path,
            "holds a line break or another control character, which a .env line cannot "
            "carry to a shell; render it to json, toml or yaml, or shape it with a template",
        )
    if text == "" or _SHELL_SAFE.fullmatch(text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


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
    return _shell_text(str(value), path)


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


ENV = FormatType(
    name="env", extensions=("env",), parse=parse, dump=dump, flat=True, discovery_rank=None
)
