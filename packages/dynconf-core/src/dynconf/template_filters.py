"""The template filters dynconf adds to jinja2's own, importable without jinja2.

Plugin discovery collects every filter (the ``dynconf_template_filters`` hook), and a
process that never renders a template — most agents — must not pay for jinja2 to do so.
These functions only need to recognise jinja2's undefined value, and one can exist only
once jinja2 is imported, so they look it up in ``sys.modules`` instead of importing it.
:mod:`dynconf.template` re-exports every name here.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from collections.abc import Callable
from typing import Any, Final

__all__ = [
    "BUILTIN_FILTERS",
    "REQUIRED_MESSAGE",
    "RequiredRefusal",
    "TemplateFilterError",
    "b64decode",
    "b64encode",
    "quote",
    "required",
    "to_json",
    "to_yaml",
]

REQUIRED_MESSAGE: Final = "required: the value is empty"
"""What ``required`` says when the template author gave no message."""


class TemplateFilterError(Exception):
    """A filter refused its input; the message must name the problem, never the value.

    Plugin filters raise this to get the same one-line error (with the template line) the
    built-in filters give; any other exception is reported by its type only.
    """


class RequiredRefusal(TemplateFilterError):
    """``required`` refused an empty value; ``given`` is the message argument, if any.

    The message is shown only when the template wrote it: ``required(db.password)`` would
    otherwise print a value, so :mod:`dynconf.template` checks it against the source.
    """

    def __init__(self, given: str | None) -> None:
        super().__init__(REQUIRED_MESSAGE)
        self.given = given


def _is_undefined(value: Any) -> bool:
    """True for jinja2's undefined value (which cannot exist before jinja2 is imported)."""
    jinja2 = sys.modules.get("jinja2")
    return jinja2 is not None and isinstance(value, jinja2.Undefined)


def _is_empty(value: Any) -> bool:
    return _is_undefined(value) or value is None or value in ("", [], {})


def _as_text(value: Any) -> str:
    """A value as the template prints it (``true``/``false``, null empty, JSON for tables)."""
    if _is_undefined(value):
        return str(value)  # raises the strict-undefined error
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return _json_text(value, compact=False)
    return str(value)


def _json_text(value: Any, *, compact: bool) -> str:
    if _is_undefined(value):
        str(value)  # raises the strict-undefined error
    separators = (",", ":") if compact else (", ", ": ")
    try:
        return json.dumps(value, ensure_ascii=False, separators=separators, allow_nan=False)
    except ValueError:
        raise TemplateFilterError(
            "json: the value holds a number JSON cannot spell (NaN or infinity)"
        ) from None
    except TypeError:
        raise TemplateFilterError("json: the value is not a document value") from None


def b64encode(value: Any) -> str:
    """Base64 of the value's UTF-8 text (standard alphabet, padded)."""
    return base64.b64encode(_as_text(value).encode("utf-8")).decode("ascii")


def b64decode(value: Any) -> str:
    """The UTF-8 text a base64 string encodes; missing padding and whitespace are forgiven."""
    compact = "".join(_as_text(value).split())
    compact += "=" * (-len(compact) % 4)
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise TemplateFilterError("b64decode: the value is not valid base64") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TemplateFilterError("b64decode: the decoded bytes are not UTF-8 text") from None


def to_json(value: Any) -> str:
    """Compact JSON (no spaces), keys in document order."""
    return _json_text(value, compact=True)


def to_yaml(value: Any) -> str:
    """Block-style YAML, keys in document order, without the final newline or ``...``.

    The last newline is dropped so ``{{ x | yaml }}`` sits on its line like any other
    expression; the author writes the newline.
    """
    if _is_undefined(value):
        str(value)
    import yaml

    try:
        text = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)
    except yaml.YAMLError:
        raise TemplateFilterError("yaml: the value is not a document value") from None
    if text.endswith("\n...\n"):
        text = text[: -len("\n...\n")]
    return text.removesuffix("\n")


def quote(value: Any) -> str:
    """The value's text as a JSON string literal (double quotes, JSON escapes)."""
    return json.dumps(_as_text(value), ensure_ascii=False)


def required(value: Any, message: str | None = None) -> Any:
    """The value itself, or an error when it is undefined, null, ``""``, ``[]`` or ``{}``."""
    if _is_empty(value):
        raise RequiredRefusal(message if isinstance(message, str) else None)
    return value


BUILTIN_FILTERS: Final[dict[str, Callable[..., Any]]] = {
    "b64encode": b64encode,
    "b64decode": b64decode,
    "json": to_json,
    "yaml": to_yaml,
    "quote": quote,
    "required": required,
}
"""The filters dynconf adds to jinja2's own; registered by :mod:`dynconf.builtin`."""
