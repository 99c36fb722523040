"""YAML: PyYAML's safe loader and dumper, held to the YAML 1.2 core schema.

PyYAML resolves plain scalars by YAML 1.1 rules, where ``yes``, ``on`` and ``0755`` are
not strings and ``2024-01-01`` is a date. The reference engine reads YAML 1.2, so the
loader here resolves only the core schema: ``true``/``false``, ``null``/``~``, decimal,
``0o`` and ``0x`` integers, and floats including ``.inf`` and ``.nan``. Everything else
is a string, so **a date stays the string as written**; an explicit ``!!timestamp`` tag
also yields its text. ``!!binary``, ``!!set`` and the other non-model tags are refused,
naming the path. Keys must be strings.

Aliases are expanded into independent copies (the engine merges in place, so two paths
must never share one table); a recursive alias, or one that expands past
:data:`~dynconf.limits.MAX_YAML_VALUES`, is refused, as is anything past the other
limits of :mod:`dynconf.limits`.

The dumper quotes every string that either YAML 1.1 or 1.2 would read as something else,
so the file means the same to both kinds of reader.
"""

from __future__ import annotations

from typing import Final

from dynconf.document import Document
from dynconf.errors import Origin
from dynconf.limits import MAX_YAML_VALUES
from dynconf.plugins import FormatType

__all__ = ["MAX_VALUES", "YAML", "dump", "parse"]

MAX_VALUES: Final = MAX_YAML_VALUES
"""How many values a YAML document may expand to (:data:`dynconf.limits.MAX_YAML_VALUES`)."""


def parse(text: str, origin: Origin) -> Document:
    """Read one YAML document whose top level is a mapping (or empty)."""
    # PyYAML is loaded by the first YAML read or write, not by format registration
    from dynconf.formats._yaml_impl import parse as parse_yaml

    return parse_yaml(text, origin)


def dump(document: Document) -> str:
    """Block-style YAML in document order, UTF-8 kept, trailing newline."""
    from dynconf.formats._yaml_impl import dump as dump_yaml

    return dump_yaml(document)


YAML = FormatType(
    name="yaml", extensions=("yaml", "yml"), parse=parse, dump=dump, discovery_rank=30
)
