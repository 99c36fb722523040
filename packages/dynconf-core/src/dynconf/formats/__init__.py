"""The built-in document formats and the two calls the rest of dynconf makes.

``BUILTIN_FORMATS`` is what :mod:`dynconf.builtin` contributes through the plugin hook;
:func:`parse_text` and :func:`dump_document` look formats up in the process registry, so a
format from a third-party plugin is used exactly like a built-in one.

Every parser maps blank text to ``{}``, refuses a top level that is not a table, and
raises :class:`~dynconf.errors.ParseError` messages without document text. Every dumper
either writes text its own parser reads back as the same document, type for type, or
refuses by path with :class:`~dynconf.errors.TypeMismatchError` — except ``.properties``,
which is written for Java: Java reads back exactly each leaf's text
(:func:`dynconf.formats.properties.java_text`), and our reader then widens that text as the
flat rules say, so a string ``"5432"`` comes back as the integer 5432.
"""

from __future__ import annotations

from dynconf.document import Document
from dynconf.errors import BackendError, Origin
from dynconf.formats.dotenv import ENV
from dynconf.formats.ini import INI
from dynconf.formats.json_ import JSON
from dynconf.formats.properties import PROPERTIES
from dynconf.formats.toml_ import TOML
from dynconf.formats.yaml_ import YAML
from dynconf.plugins import FormatType, default_registry

__all__ = [
    "BUILTIN_FORMATS",
    "ENV",
    "INI",
    "JSON",
    "PROPERTIES",
    "TOML",
    "YAML",
    "dump_document",
    "parse_text",
]

BUILTIN_FORMATS: tuple[FormatType, ...] = (JSON, TOML, YAML, INI, PROPERTIES, ENV)


def parse_text(text: str, format_name: str, origin: Origin | None = None) -> Document:
    """Parse ``text`` with the registered format named ``format_name``."""
    fmt = default_registry().format_named(format_name)
    return fmt.parse(text, origin if origin is not None else Origin.inline())


def dump_document(document: Document, format_name: str) -> str:
    """Serialise ``document`` with the registered format named ``format_name``."""
    fmt = default_registry().format_named(format_name)
    if fmt.dump is None:
        raise BackendError(
            f"the {fmt.name} format can be read but not written; render to json, toml or "
            "yaml instead"
        )
    return fmt.dump(document)
