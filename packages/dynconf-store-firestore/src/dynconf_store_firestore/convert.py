"""Firestore's typed field values turned into a plain document, one stated rule per type.

A Firestore document carries types no configuration format has (timestamps, references,
bytes, geo points, vectors). Every store hands the engine a plain JSON document, so each of
those types gets exactly one spelling here, and the README lists the same table:

==================  ================================================================
Firestore type      in the document
==================  ================================================================
null, boolean       ``null``, ``true`` / ``false``
integer             a JSON integer (Firestore integers are 64-bit)
double              a JSON number; NaN and ±infinity, which JSON cannot hold, become the
                    strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
string              the string
timestamp           an RFC 3339 string in UTC with a ``Z`` and the stored precision
                    (``2026-01-02T03:04:05.123456789Z``)
bytes               a base64 string (standard alphabet, padded)
reference           the referenced document's path inside its database
                    (``collection/doc``)
geo point           ``{"latitude": <number>, "longitude": <number>}``
vector              an array of numbers
array, map          an array, an object, converted element by element
==================  ================================================================

Anything else (a type a newer Firestore adds) is refused with the field's path, never its
value, rather than guessed at.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

from dynconf.document import Document, Value

__all__ = ["UnconvertibleField", "plain_document", "plain_value", "rfc3339", "text_size_floor"]


class UnconvertibleField(Exception):
    """A field holds a type with no stated rule; ``path`` names the field, never the value."""

    def __init__(self, path: str, type_name: str) -> None:
        super().__init__(path, type_name)
        self.path = path
        self.type_name = type_name


def rfc3339(stamp: dt.datetime) -> str:
    """An RFC 3339 UTC string keeping the stored precision (nanoseconds when present)."""
    rfc = getattr(stamp, "rfc3339", None)
    if callable(rfc):  # google.api_core's DatetimeWithNanoseconds keeps nanoseconds
        return str(rfc())
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    text = stamp.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if stamp.microsecond:
        text += "." + f"{stamp.microsecond:06d}".rstrip("0")
    return text + "Z"


def plain_document(fields: Mapping[str, Any]) -> Document:
    """The document for a snapshot's ``to_dict()``; keys stay as Firestore names them."""
    return {str(name): plain_value(value, str(name)) for name, value in fields.items()}


def plain_value(value: Any, path: str) -> Value:
    """One Firestore value as a plain document value (see the module table)."""
    from google.cloud.firestore_v1 import GeoPoint
    from google.cloud.firestore_v1.base_document import BaseDocumentReference
    from google.cloud.firestore_v1.vector import Vector

    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dt.datetime):
        return rfc3339(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, BaseDocumentReference):
        return str(value.path)
    if isinstance(value, GeoPoint):
        return {"latitude": float(value.latitude), "longitude": float(value.longitude)}
    if isinstance(value, Vector):
        return [float(x) for x in value]
    if isinstance(value, Mapping):
        return {str(k): plain_value(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, Sequence):
        return [plain_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise UnconvertibleField(path, type(value).__name__)


def text_size_floor(fields: Mapping[str, Any]) -> int:
    """The fewest bytes the document's JSON text can take, counted without converting it.

    Every key and string is written at least as long as its UTF-8 (plus its quotes), bytes at
    least as long as their base64, and every other value in at least one byte; escaping, the
    separators and the spelling of numbers only add. So a floor past the ceiling is a
    document past it, refused before the conversion and the JSON encoding are paid for.
    """
    total = 2  # the document's braces
    pending: list[Any] = []
    for name, value in fields.items():
        total += len(str(name).encode("utf-8")) + 3  # the quotes and the colon
        pending.append(value)
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            total += len(value.encode("utf-8")) + 2
        elif isinstance(value, bytes | bytearray | memoryview):
            total += 4 * ((len(value) + 2) // 3) + 2
        elif isinstance(value, Mapping):
            total += 2
            for name, item in value.items():
                total += len(str(name).encode("utf-8")) + 3
                pending.append(item)
        elif isinstance(value, Sequence):
            total += 2
            pending.extend(value)
        else:
            total += 1
    return total
