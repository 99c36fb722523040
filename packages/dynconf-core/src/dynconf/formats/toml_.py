"""TOML: read with :mod:`tomllib`, written with ``tomli-w``.

TOML has dates and times; the document model does not. A date, time or datetime becomes
its RFC 3339 string the way the reference engine prints it: ``T`` between date and time,
fractional seconds only when non-zero (trailing zeros trimmed, microsecond precision), and
``Z`` for a zero offset. ``1979-05-27 07:32:00+00:00`` therefore reads as
``"1979-05-27T07:32:00Z"``. TOML has no null, so a null is refused by path on the way out,
as is an integer outside the 64-bit range the TOML specification allows — on the way in
too, where ``tomllib`` alone would keep any size.

Before ``tomllib`` reads the text, :mod:`dynconf.formats._toml_scan` refuses a path past
the nesting limit or an overlong integer (``tomllib`` would spend quadratic memory on the
first and raise on the second); what it reads is then held to every limit of
:mod:`dynconf.limits`.

``tomllib`` and ``tomli-w`` are imported by the first parse or dump: the format registry
loads every format at start, and a process that never reads TOML (an init agent rendering
JSON) should not compile their grammars.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from dynconf.document import Document
from dynconf.errors import Origin, ParseError, TypeMismatchError
from dynconf.formats._common import (
    I64_MAX,
    I64_MIN,
    check_document,
    is_blank,
    refuse_foreign,
    safe_reason,
    shown,
    walk,
)
from dynconf.formats._toml_scan import scan
from dynconf.limits import nested_beyond_parser
from dynconf.plugins import FormatType

__all__ = ["TOML", "dump", "parse"]

_AT = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")

# tomllib reasons that name a key or quote a character of the input, rewritten so the
# message keeps the rule and loses the text.
_REWORDED: tuple[tuple[str, str], ...] = (
    ("Found invalid character", "invalid character"),
    ("Illegal character", "a string holds a character TOML does not allow there"),
    ("Cannot declare", "a table is declared twice"),
    ("Cannot mutate immutable namespace", "an inline table or array cannot be extended"),
    ("Duplicate inline table key", "a key appears twice in an inline table"),
    ("Cannot redefine namespace", "a table is defined twice"),
)


def _reason(message: str) -> str:
    for prefix, replacement in _REWORDED:
        if message.startswith(prefix):
            return replacement
    return safe_reason(message)


def _end_position(text: str) -> tuple[int, int]:
    line = text.count("\n") + 1
    column = len(text) - (text.rfind("\n") + 1) + 1
    return line, column


def _fraction(microsecond: int) -> str:
    return f".{microsecond:06d}".rstrip("0") if microsecond else ""


def _time_text(value: dt.time | dt.datetime) -> str:
    return f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}{_fraction(value.microsecond)}"


def _offset_text(value: dt.datetime) -> str:
    offset = value.utcoffset()
    if offset is None:
        return ""
    minutes = int(offset.total_seconds()) // 60
    if minutes == 0:
        return "Z"
    sign = "-" if minutes < 0 else "+"
    hours, rest = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{rest:02d}"


def date_text(value: dt.date | dt.time) -> str:
    """The RFC 3339 spelling of a TOML date, time or datetime (see the module docstring)."""
    if isinstance(value, dt.datetime):
        return f"{value.date().isoformat()}T{_time_text(value)}{_offset_text(value)}"
    if isinstance(value, dt.date):
        return value.isoformat()
    return _time_text(value)


def _plain(document: dict[str, Any]) -> Document:
    """``document`` with every date and time replaced by its text, in place, iteratively."""
    stack: list[dict[str, Any] | list[Any]] = [document]
    while stack:
        container = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            value = container[key]  # type: ignore[index]
            if isinstance(value, dict | list):
                stack.append(value)
            elif isinstance(value, dt.date | dt.time):
                container[key] = date_text(value)  # type: ignore[index]
    return document


def parse(text: str, origin: Origin) -> Document:
    """Read a TOML document; dates and times become strings."""
    if is_blank(text):
        return {}
    scan(text, origin)
    import tomllib

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _AT.search(message)
        if match is None:
            line, column = _end_position(text)
        elif match.group(1) is None:
            line, column = _end_position(text)
            message = message[: match.start()]
        else:
            line, column = int(match.group(1)), int(match.group(2))
            message = message[: match.start()]
        raise ParseError(
            f"TOML parse error at line {line}, column {column}: {_reason(message)}",
            origin=origin,
        ) from None
    except RecursionError:
        raise nested_beyond_parser("TOML", origin) from None
    document = _plain(raw)
    check_document(document, "TOML", origin)
    for path, value in walk(document):
        if _wide_integer(value):
            # tomllib keeps any size; TOML 1.0 says a reader must refuse what does not fit
            raise ParseError(
                f"TOML document refused: `{shown(path)}` is an integer outside the 64-bit "
                "range TOML allows; quote it as a string",
                path=path,
                origin=origin,
            )
    return document


def _wide_integer(value: object) -> bool:
    """An integer TOML cannot hold (the specification's range is 64-bit signed)."""
    return (
        isinstance(value, int) and not isinstance(value, bool) and not I64_MIN <= value <= I64_MAX
    )


def dump(document: Document) -> str:
    """TOML as ``tomli-w`` lays it out; null and out-of-range integers refused by path."""
    refuse_foreign(document, "TOML")
    for path, value in walk(document):
        if value is None:
            raise TypeMismatchError(
                f"`{shown(path)}` is null, and TOML has no null; remove the key or render to "
                "json or yaml instead",
                path=path,
            )
        if _wide_integer(value):
            raise TypeMismatchError(
                f"`{shown(path)}` is an integer outside the 64-bit range TOML allows; store it "
                "as a string or render to json or yaml instead",
                path=path,
            )
    import tomli_w

    return tomli_w.dumps(document)


TOML = FormatType(name="toml", extensions=("toml",), parse=parse, dump=dump, discovery_rank=10)
