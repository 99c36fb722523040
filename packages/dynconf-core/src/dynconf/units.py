"""Durations and byte sizes, for fields declared as one (engine contract §1.5).

A duration is whole-number components, each with a case-sensitive unit (``ms``, ``s``,
``m``, ``h``, ``d``), chained in any order with optional spaces: ``1h30m``, ``1m 500ms``.
A bare integer means seconds; a numeric *string* without a unit is refused, because
``"30"`` in a duration field is more often a forgotten unit than a choice.

A byte size is a whole number with an optional, case-insensitive unit: ``B``; ``K``,
``KiB``, ``M``, ``MiB``, ``G``, ``GiB``, ``T``, ``TiB`` (powers of 1024); ``KB``, ``MB``,
``GB``, ``TB`` (powers of 1000). A bare number, integer or string, means bytes.

Both are limited to what fits an unsigned 64-bit count (seconds, or bytes). Errors list
the valid spellings and never repeat the input: these fields are sometimes filled from
places that also hold secrets.
"""

from __future__ import annotations

import re
from typing import Final

from dynconf.errors import Origin, TypeMismatchError

__all__ = [
    "format_duration",
    "parse_bytes",
    "parse_duration",
    "parse_seconds_or_duration",
]

_U64_MAX: Final = 2**64 - 1
_DURATION_UNITS_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_COMPONENT = re.compile(r"[ \t]*([0-9]+)[ \t]*(ms|s|m|h|d)(?![A-Za-z])[ \t]*")
_BYTE_UNITS: Final = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kib": 2**10,
    "m": 2**20,
    "mib": 2**20,
    "g": 2**30,
    "gib": 2**30,
    "t": 2**40,
    "tib": 2**40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
_BYTES = re.compile(r"[ \t]*([0-9]+)[ \t]*([A-Za-z]*)[ \t]*")
_SECONDS = re.compile(r"[ \t]*[0-9]+[ \t]*")

_DURATION_RULE: Final = (
    "a duration is whole numbers each followed by a unit: ms, s, m, h or d (units are "
    "case-sensitive; for example 90s, 1h30m or 1m 500ms), or a bare integer of seconds, "
    "not negative and at most 2^64-1 seconds"
)
_BYTES_RULE: Final = (
    "a byte size is a whole number with an optional unit: B, K/KiB, M/MiB, G/GiB, T/TiB "
    "(powers of 1024) or KB, MB, GB, TB (powers of 1000), case-insensitive, not negative "
    "and at most 2^64-1 bytes"
)
_SECONDS_RULE: Final = (
    "the value is whole seconds (for example 300) or a duration with a unit: ms, s, m, h "
    "or d (for example 90s, 15m, 6h or 1d), not negative"
)


def _refuse(rule: str, path: str, origin: Origin | None) -> TypeMismatchError:
    where = f"`{path}` is not valid: " if path else ""
    return TypeMismatchError(f"{where}{rule}", path=path, origin=origin)


def _whole(value: object) -> int | None:
    """``value`` when it is a non-negative int (bool excluded), else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _duration_ms(text: str) -> int | None:
    total = 0
    position = 0
    while position < len(text):
        match = _COMPONENT.match(text, position)
        if match is None:
            return None
        total += int(match.group(1)) * _DURATION_UNITS_MS[match.group(2)]
        position = match.end()
    return total if position else None


def parse_duration(value: object, *, path: str = "", origin: Origin | None = None) -> float:
    """Seconds in a duration: an integer of seconds, or a string such as ``1h30m``."""
    seconds = _whole(value)
    if seconds is not None:
        if seconds > _U64_MAX:
            raise _refuse(_DURATION_RULE, path, origin)
        return float(seconds)
    if not isinstance(value, str):
        raise _refuse(_DURATION_RULE, path, origin)
    millis = _duration_ms(value)
    if millis is None or millis // 1000 > _U64_MAX:
        raise _refuse(_DURATION_RULE, path, origin)
    return millis / 1000


def format_duration(seconds: float) -> str:
    """The engine's serialised spelling of a duration: total milliseconds, ``<n>ms``."""
    return f"{round(seconds * 1000)}ms"


def parse_bytes(value: object, *, path: str = "", origin: Origin | None = None) -> int:
    """Bytes in a size: an integer, or a string such as ``512MiB`` or ``10 GB``."""
    count = _whole(value)
    if count is None and isinstance(value, str):
        match = _BYTES.fullmatch(value)
        unit = _BYTE_UNITS.get(match.group(2).lower()) if match else None
        if match is not None and unit is not None:
            count = int(match.group(1)) * unit
    if count is None or count > _U64_MAX:
        raise _refuse(_BYTES_RULE, path, origin)
    return count


def parse_seconds_or_duration(
    value: object, *, path: str = "", origin: Origin | None = None
) -> float:
    """Seconds from whole seconds (``300`` or ``"300"``) or a duration (``90s``, ``1d``).

    Used by knobs such as the agent's ``max-staleness``, whose annotations are strings
    and whose documentation shows both spellings.
    """
    if isinstance(value, str) and _SECONDS.fullmatch(value):
        value = int(value)
    try:
        return parse_duration(value, path=path, origin=origin)
    except TypeMismatchError:
        raise _refuse(_SECONDS_RULE, path, origin) from None
