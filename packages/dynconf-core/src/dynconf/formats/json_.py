"""JSON: the format every consumer reads, with its own types and nothing added.

Parsing refuses what JSON does not have (``NaN``, ``Infinity``, numbers past the float
range) instead of letting Python's reader accept them, so a file that loads here loads in
any other JSON reader; the limits of :mod:`dynconf.limits` (nesting, integer size, lone
surrogates, which JSON's ``\\ud800`` escape can spell) are refused by path. Dumping is
pretty (two-space indent, UTF-8 kept, trailing newline) and refuses non-finite floats by
path for the same reason.
"""

from __future__ import annotations

import json
import math

from dynconf.document import Document
from dynconf.errors import Origin, ParseError, TypeMismatchError
from dynconf.formats._common import (
    check_document,
    is_blank,
    refuse_foreign,
    require_table,
    safe_reason,
    shown,
    walk,
)
from dynconf.limits import LONG_INTEGER, integer_text_fits, nested_beyond_parser
from dynconf.plugins import FormatType

__all__ = ["JSON", "dump", "parse"]

LABEL = "JSON"


class _OutOfRange(ValueError):
    """A number JSON can spell but a 64-bit float cannot hold, or a non-JSON constant."""


def _parse_float(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise _OutOfRange("a number is out of range for a 64-bit float")
    return value


def _parse_int(raw: str) -> object:
    return int(raw) if integer_text_fits(raw.lstrip("-")) else LONG_INTEGER


def _parse_constant(_raw: str) -> float:
    raise _OutOfRange("NaN and Infinity are not JSON; write the number or a string")


def parse(text: str, origin: Origin) -> Document:
    """Read a JSON document whose top level is an object."""
    if is_blank(text):
        return {}
    try:
        value = json.loads(
            text, parse_float=_parse_float, parse_int=_parse_int, parse_constant=_parse_constant
        )
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"JSON parse error at line {exc.lineno}, column {exc.colno}: {safe_reason(exc.msg)}",
            origin=origin,
        ) from None
    except _OutOfRange as exc:
        raise ParseError(f"JSON parse error: {exc}", origin=origin) from None
    except RecursionError:
        raise nested_beyond_parser(LABEL, origin) from None
    document = require_table(value, LABEL, origin)
    check_document(document, LABEL, origin)
    return document


def dump(document: Document) -> str:
    """Pretty JSON with a trailing newline; non-finite floats are refused by path."""
    refuse_foreign(document, LABEL)
    for path, value in walk(document):
        if isinstance(value, float) and not math.isfinite(value):
            raise TypeMismatchError(
                f"`{shown(path)}` is an infinite or NaN number, which JSON cannot spell; "
                "render to toml or yaml, or store it as a string",
                path=path,
            )
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


JSON = FormatType(name="json", extensions=("json",), parse=parse, dump=dump, discovery_rank=20)
