"""INI: git-config style sections over the flat-format widening rules (§2.2).

Reading: ``[a.b]`` opens a nested table, keys before any header sit at the root, a
dotted key nests under the current section, whole-line ``;``/``#`` comments, one
``key = value`` per line split on the first ``=``, no continuations. A key that is both a
value and a table is an error; a repeated key takes the later value.

Writing (the layout the agent renders): top-level scalars first, then one ``[section]``
per top-level table with its nested keys dotted, then a ``[a.b]`` header for each empty
nested table. A string that would widen or lose surrounding whitespace is written
``"…"`` (read back verbatim, inner quotes included). INI has no line continuation, so a
string holding a line break is refused by path, as are arrays, null and keys the syntax
cannot carry.
"""

from __future__ import annotations

from dynconf.document import Document, Value
from dynconf.errors import Origin
from dynconf.formats._common import check_document, is_blank
from dynconf.formats._flat import (
    insert,
    leaves,
    lines,
    open_table,
    parse_error,
    refuse,
    trim,
    widen,
    widened_text,
)
from dynconf.plugins import FormatType

__all__ = ["INI", "dump", "parse"]

LABEL = "INI"


def _segments(name: str, line: int, origin: Origin) -> list[str]:
    segments = name.split(".")
    if any(segment == "" for segment in segments):
        raise parse_error(
            LABEL,
            line,
            "a name has an empty segment; separate names with single dots",
            origin,
        )
    return segments


def parse(text: str, origin: Origin) -> Document:
    """Read an INI document into nested tables with widened scalars."""
    tree: Document = {}
    if is_blank(text):
        return tree
    section: list[str] = []
    for number, raw in lines(text):
        line = trim(raw)
        if not line or line[0] in ";#":
            continue
        if line[0] == "[":
            if len(line) < 2 or line[-1] != "]":
                raise parse_error(LABEL, number, "a section header must end with `]`", origin)
            section = _segments(trim(line[1:-1]), number, origin)
            open_table(tree, section, label=LABEL, line=number, origin=origin)
            continue
        key, separator, value = line.partition("=")
        if not separator:
            raise parse_error(
                LABEL, number, "expected `key = value`, a `[section]` header or a comment", origin
            )
        key = trim(key)
        if not key:
            raise parse_error(LABEL, number, "a key is empty; write a name before `=`", origin)
        segments = [*section, *_segments(key, number, origin)]
        insert(tree, segments, widen(trim(value)), label=LABEL, line=number, origin=origin)
    check_document(tree, LABEL, origin)
    return tree


def _name_problem(segments: list[str], *, header: bool) -> str | None:
    """Why a key (or header name) would not read back as these segments, if it would not."""
    for segment in segments:
        if segment == "":
            return "an empty key"
        if "." in segment:
            return "a key holding `.`, which INI reads as nesting"
        if "\n" in segment or "\r" in segment:
            return "a key holding a line break"
        if not header and "=" in segment:
            return "a key holding `=`"
    name = ".".join(segments)
    if trim(name) != name:
        return "a key with surrounding whitespace"
    if not header and name[0] in ";#[":
        return "a key starting with `;`, `#` or `[`"
    return None


def _check_name(path: str, segments: list[str], *, header: bool) -> None:
    problem = _name_problem(segments, header=header)
    if problem is not None:
        raise refuse(
            path,
            f"has {problem}, which INI cannot spell; rename it or render to json, toml or "
            "yaml instead",
        )


def _line(path: str, key: list[str], value: Value) -> str:
    _check_name(path, key, header=False)
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        raise refuse(
            path,
            "is a string with a line break, and INI has no spelling for one; render to "
            "properties, json, toml or yaml instead",
        )
    text = widened_text(value, path, LABEL, trims=True)
    return f"{'.'.join(key)} = {text}" if text else f"{'.'.join(key)} ="


def dump(document: Document) -> str:
    """INI text that :func:`parse` reads back as ``document``; refusals name the path."""
    root: list[str] = []
    sections: dict[str, list[str]] = {}
    empty_headers: dict[str, list[str]] = {}
    for segments, value in leaves(document, LABEL, keep_empty_tables=True):
        path = ".".join(segments)
        head = segments[0]
        if isinstance(value, dict):
            _check_name(path, segments, header=True)
            if len(segments) == 1:
                sections.setdefault(head, [])
            else:
                empty_headers.setdefault(head, []).append(f"[{path}]")
        elif len(segments) == 1:
            root.append(_line(path, segments, value))
        else:
            _check_name(head, [head], header=True)
            sections.setdefault(head, []).append(_line(path, segments[1:], value))
    blocks = ["\n".join(root)] if root else []
    for head in dict.fromkeys([*sections, *empty_headers]):
        body = [f"[{head}]", *sections.get(head, [])]
        blocks.append("\n".join(body))
        blocks.extend(empty_headers.get(head, []))
    return "\n\n".join(blocks) + "\n" if blocks else ""


INI = FormatType(
    name="ini", extensions=("ini",), parse=parse, dump=dump, flat=True, discovery_rank=40
)
