"""Every dumper's promise, checked on generated documents: parse(dump(doc)) is doc.

Comparison is type-exact (``same_value``): ``True``, ``1`` and ``1.0`` are different
documents, and so are ``"1"`` and ``1``.

``.properties`` is written for Java, which keeps every value a string, so its promise is
what Java preserves: the file reads back as each leaf's text (:func:`java_text`), and our
own widening reader answers that text widened (``"5432"`` comes back as 5432). ``.env`` is
written for ``/bin/sh`` (env-inject sources it) with the same trade: the shell sees each
leaf's text, and our reader types that text by the grammar.
"""

from __future__ import annotations

from typing import Any

import pytest
from format_strategies import (
    env_documents,
    ini_documents,
    json_documents,
    properties_documents,
    toml_documents,
    yaml_documents,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynconf.document import Document, same_value, walk_leaves
from dynconf.errors import Origin
from dynconf.formats import ENV, INI, JSON, TOML, YAML, dotenv, properties
from dynconf.formats._flat import widen
from dynconf.plugins import FormatType
from dynconf.text import type_text

ORIGIN = Origin.inline()
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _round_trip(fmt: FormatType, document: Document) -> None:
    assert fmt.dump is not None
    text = fmt.dump(document)
    back = fmt.parse(text, ORIGIN)
    assert same_value(back, document), text


CASES: list[tuple[FormatType, Any]] = [
    (JSON, json_documents()),
    (TOML, toml_documents()),
    (YAML, yaml_documents()),
    (INI, ini_documents()),
]


@pytest.mark.parametrize(("fmt", "documents"), CASES, ids=[fmt.name for fmt, _ in CASES])
@SETTINGS
@given(data=st.data())
def test_dump_then_parse_answers_the_same_document(
    fmt: FormatType, documents: Any, data: st.DataObject
) -> None:
    _round_trip(fmt, data.draw(documents))


@SETTINGS
@given(document=properties_documents())
def test_properties_reads_back_as_the_text_java_keeps(document: Document) -> None:
    text = properties.dump(document)
    java = {path: properties.java_text(value) for path, value in walk_leaves(document)}
    assert properties.load_strings(text, ORIGIN) == java, text
    assert text.isascii()


@SETTINGS
@given(document=properties_documents())
def test_properties_reads_back_widened_through_our_reader(document: Document) -> None:
    text = properties.dump(document)
    widened: Document = {}
    for path, value in walk_leaves(document):
        node = widened
        *parents, last = path.split(".")
        for segment in parents:
            node = node.setdefault(segment, {})
        node[last] = widen(properties.java_text(value))
    assert same_value(properties.parse(text, ORIGIN), widened), text


@pytest.mark.parametrize("fmt", [JSON, TOML, YAML], ids=lambda f: f.name)
def test_rich_dump_is_pretty_with_a_trailing_newline(fmt: FormatType) -> None:
    assert fmt.dump is not None
    text = fmt.dump({"a": {"b": 1, "c": [1, 2]}, "d": "x"})
    assert text.endswith("\n")
    assert len(text.splitlines()) > 1


def _typed_by_the_grammar(document: Document) -> Document:
    out: Document = {}
    for key, value in document.items():
        if isinstance(value, dict):
            out[key] = _typed_by_the_grammar(value)
        else:
            out[key] = type_text(value) if isinstance(value, str) else value
    return out


@SETTINGS
@given(document=env_documents())
def test_env_reads_back_as_the_grammar_types_the_text_the_shell_sees(document: Document) -> None:
    assert ENV.dump is not None
    text = ENV.dump(document)
    assert same_value(dotenv.parse(text, ORIGIN), _typed_by_the_grammar(document)), text
