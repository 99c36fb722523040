"""The engine's document limits, all in one place, and the one check that applies them.

A document can come from a store another tenant controls, and a process (the node agent)
may serve many tenants, so one document must end in a refusal, never in a crash. Python
fails on input a real configuration never holds: nesting past its recursion limit
(``RecursionError`` in every recursive walker and writer), an integer past its int-to-text
ceiling (``ValueError``, 4,300 digits by default and as low as 640), and a lone surrogate
(``UnicodeEncodeError`` when the output is encoded). Each is bounded here, at parse time,
with a :class:`~dynconf.errors.LimitError` that names the path and the limit:

* :data:`MAX_DOCUMENT_BYTES`: the fetched text, checked before parsing
  (:func:`dynconf.render.check_size`);
* :data:`MAX_DEPTH`: no path is longer than 128 keys or array indices;
* :data:`MAX_INTEGER_DIGITS`: an integer has at most 100 decimal digits;
* :data:`MAX_YAML_VALUES`: a YAML document expands to at most a million values, aliases
  included;
* no string or key holds a lone surrogate (it has no UTF-8 spelling).

Parsers call :func:`check_document` on what they read and every writer calls it before
writing, so a document built in Python meets the same limits on the way out. Because
every document is at most :data:`MAX_DEPTH` deep, the recursive writers of the libraries
underneath (``json``, ``tomli-w``, PyYAML) stay far inside Python's recursion limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from dynconf.errors import LimitError, Origin

__all__ = [
    "LONG_INTEGER",
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_INTEGER_DIGITS",
    "MAX_YAML_VALUES",
    "check_document",
    "integer_text_fits",
    "path_fits",
    "path_text",
    "shown",
    "too_deep",
    "too_deep_at",
]

MAX_DOCUMENT_BYTES: Final = 8 * 1024 * 1024
"""The engine's document size ceiling (8 MiB), overridden by ``--max-document-bytes``."""

MAX_DEPTH: Final = 128
"""The longest path a document may hold, counting keys and array indices.

Twice the text grammar's 64 (:data:`dynconf.text.MAX_DEPTH`), so every value that grammar
accepts still fits under a 64-segment ``.env`` name; far below the ~330 levels at which
PyYAML's recursive writer meets Python's default recursion limit of 1,000.
"""

MAX_INTEGER_DIGITS: Final = 100
"""The most decimal digits an integer may have: past any 128-bit integer (39 digits)
and inside the smallest int-to-text ceiling Python can be set to (640)."""

MAX_YAML_VALUES: Final = 1_000_000
"""How many values a YAML document may expand to, aliases included."""

_INTEGER_CEILING: Final = 10**MAX_INTEGER_DIGITS
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SHOWN_CHARS: Final = 200


class _LongInteger:
    """Stands in for an integer literal past :data:`MAX_INTEGER_DIGITS` until its path is
    known; converting the text would raise (or cost quadratic time) in the parser."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LONG_INTEGER"


LONG_INTEGER: Final = _LongInteger()
"""What a parser's integer hook returns for a literal that is too long to convert."""


def path_fits(length: int) -> bool:
    """Whether a path of ``length`` keys and array indices is within :data:`MAX_DEPTH`.

    The one way depth is counted, by every reader, every writer and the TOML pre-scan:
    the length of the path of a value that exists. A container whose own path is at the
    limit is fine while it is empty; only what it holds would be past it. (Counting the
    container's brackets instead made the TOML reader refuse a 128-deep empty array its
    writer had just written.)
    """
    return length <= MAX_DEPTH


def integer_text_fits(digits: str) -> bool:
    """Whether an integer literal's digits (sign, prefix and ``_`` removed) are in bounds.

    Leading zeros do not count: ``007`` is the integer 7.
    """
    return len(digits.lstrip("0")) <= MAX_INTEGER_DIGITS


def shown(path: str) -> str:
    """A path as it appears inside a message: one line, UTF-8-safe, at most 200 characters.

    Keys are names, not values, so messages may carry them; control characters and lone
    surrogates are spelled as escapes, and a path past 200 characters is cut with ``…``.
    """
    cut = path if len(path) <= _SHOWN_CHARS else path[:_SHOWN_CHARS]
    escaped = "".join(
        f"\\u{ord(ch):04x}"
        if (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or 0xD800 <= ord(ch) <= 0xDFFF)
        else ch
        for ch in cut
    )
    return escaped if cut is path else escaped + "…"


def path_text(segments: Iterable[str | int]) -> str:
    """The dotted spelling of path segments; an ``int`` segment is an array index."""
    out = ""
    for segment in segments:
        if isinstance(segment, int):
            out += f"[{segment}]"
        else:
            out = f"{out}.{segment}" if out else segment
    return out


def _refusal(label: str, path: str, reason: str, origin: Origin | None) -> LimitError:
    where = f"`{shown(path)}`" if path else "the top level"
    return LimitError(f"{label} document refused: {where} {reason}", path=path, origin=origin)


def too_deep(label: str, segments: Iterable[str | int], origin: Origin | None) -> LimitError:
    """The refusal of a path longer than :data:`MAX_DEPTH`, naming its first segments."""
    return too_deep_at(label, path_text(list(segments)[: MAX_DEPTH + 1]), origin)


def too_deep_at(label: str, path: str, origin: Origin | None) -> LimitError:
    """:func:`too_deep` for a caller that keeps its path as text."""
    return _refusal(
        label, path, f"nests past the limit of {MAX_DEPTH} levels; flatten the document", origin
    )


def nested_beyond_parser(label: str, origin: Origin | None) -> LimitError:
    """The refusal of nesting so deep that the parser itself gave up (no path is known)."""
    return LimitError(
        f"{label} document refused: it nests past the limit of {MAX_DEPTH} levels; "
        "flatten the document",
        origin=origin,
    )


def long_integer(label: str, path: str, origin: Origin | None) -> LimitError:
    return _refusal(
        label,
        path,
        f"is an integer with more than {MAX_INTEGER_DIGITS} digits, past the limit; "
        "store it as a string",
        origin,
    )


# A path while walking: ``(parent, segment)`` links, joined only when a refusal needs it.
_Link = tuple[Any, str | int] | None


def _segments(link: _Link) -> list[str | int]:
    out: list[str | int] = []
    while link is not None:
        link, segment = link
        out.append(segment)
    out.reverse()
    return out


def check_document(document: Mapping[str, Any], label: str, origin: Origin | None = None) -> None:
    """Refuse, by path, a document past :data:`MAX_DEPTH` or :data:`MAX_INTEGER_DIGITS`,
    or holding a lone surrogate in a key or string; iterative, in document order.

    Values outside the document model are left to the writers' own checks.
    """
    stack: list[tuple[Any, _Link, int]] = [(document, None, 0)]
    while stack:
        value, link, depth = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise _refusal(
                    label,
                    path_text(_segments(link)),
                    "holds a lone surrogate, which has no UTF-8 spelling; fix the text",
                    origin,
                )
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int):
            if not -_INTEGER_CEILING < value < _INTEGER_CEILING:
                raise long_integer(label, path_text(_segments(link)), origin)
        elif value is LONG_INTEGER:
            raise long_integer(label, path_text(_segments(link)), origin)
        elif isinstance(value, dict | list):
            if value and not path_fits(depth + 1):
                first = next(iter(value)) if isinstance(value, dict) else 0
                raise too_deep(label, [*_segments(link), first], origin)
            children: list[tuple[Any, _Link, int]] = []
            if isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(key, str) and _SURROGATE.search(key):
                        raise _refusal(
                            label,
                            path_text([*_segments(link), key]),
                            "is a key holding a lone surrogate, which has no UTF-8 spelling; "
                            "rename it",
                            origin,
                        )
                    children.append((item, (link, key), depth + 1))
            else:
                children.extend(
                    (item, (link, index), depth + 1) for index, item in enumerate(value)
                )
            children.reverse()
            stack.extend(children)
