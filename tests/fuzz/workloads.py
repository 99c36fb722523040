"""The calls the bounded worker runs, one per example, answering small summaries.

They run in the forked child of :class:`tests.fuzz.support.Bounded`, so they return plain
tuples (never a parsed document: a 3,000-deep document would not even pickle) and they catch
everything, reporting an exception by type, message and MRO for the parent to judge.
"""

from __future__ import annotations

from typing import Any

from tests.fuzz.support import raised

FORMATS = ("json", "yaml", "toml", "ini", "properties", "env")


def parse_and_render(format_name: str, text: str) -> dict[str, Any]:
    """Parse ``text`` as ``format_name``; render what it gives into every format and back.

    Answers ``{"parse": ("ok",) | ("raised", type, message, mro), "render": {fmt: …}}`` where
    a render entry is ``("ok", round_trips)`` or the raised triple.
    """
    from dynconf.document import same_value
    from dynconf.formats import dump_document, parse_text

    result: dict[str, Any] = {"render": {}}
    try:
        document = parse_text(text, format_name)
    except BaseException as error:  # the property judges what escaped
        result["parse"] = ("raised", *raised(error))
        return result
    result["parse"] = ("ok",)
    for target in FORMATS:
        try:
            written = dump_document(document, target)
        except BaseException as error:
            result["render"][target] = ("raised", *raised(error))
            continue
        try:
            back = parse_text(written, target)
        except BaseException as error:
            result["render"][target] = ("reread-raised", *raised(error))
            continue
        try:
            if target == "env":
                # Written for /bin/sh (env-inject sources it): our reader types the text the
                # shell sees by the grammar, as the env layer does.
                result["render"][target] = ("ok", same_value(back, _typed_env(document)))
                continue
            if target == "properties":
                # Written for Java: what reads back exactly is each leaf's text, as
                # Properties.load sees it (our reader then widens it, by the flat rules).
                same = _java_reads_back(written, document)
                result["render"][target] = ("ok", same)
                continue
            same = same_value(back, document)
        except BaseException as error:
            result["render"][target] = ("compare-raised", *raised(error))
            continue
        result["render"][target] = ("ok", same)
    return result


def _typed_env(document: Any) -> Any:
    from dynconf.text import type_text

    if isinstance(document, dict):
        return {key: _typed_env(value) for key, value in document.items()}
    return type_text(document) if isinstance(document, str) else document


def _java_reads_back(written: str, document: Any) -> bool:
    from dynconf.document import walk_leaves
    from dynconf.errors import Origin
    from dynconf.formats import properties

    expected = {path: properties.java_text(value) for path, value in walk_leaves(document)}
    return properties.load_strings(written, Origin.inline()) == expected


def render_template(source: str, context: dict[str, Any]) -> tuple[Any, ...]:
    """Render ``source`` in the sandbox: ``("ok", length, lines)`` or the raised triple."""
    from dynconf.errors import Origin
    from dynconf.template import render_template as render

    try:
        out = render(source, context, origin=Origin.inline())
    except BaseException as error:
        return ("raised", *raised(error))
    return ("ok", len(out), out.count("\n"))


def allocate(size: int) -> int:
    """Touch ``size`` bytes and answer the size (the worker's own memory test)."""
    return len(bytearray(b"x" * size))
