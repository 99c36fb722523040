"""Every dumper's promise, checked on generated documents: parse(dump(doc)) is doc.

Comparison is type-exact (``same_value``): ``True``, ``1`` and ``1.0`` are different
documents, and so are ``"1"`` and ``1``.
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

from dynconf.document import Document, same_value
from dynconf.errors import Origin
from dynconf.formats import ENV, INI, JSON, PROPERTIES, TOML, YAML
from dynconf.plugins import FormatType

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
    (PROPERTIES, properties_documents()),
    (ENV, env_documents()),
]


@pytest.mark.parametrize(("fmt", "documents"), CASES, ids=[fmt.name for fmt, _ in CASES])
@SETTINGS
@given(data=st.data())
def test_dump_then_parse_answers_the_same_document(
    fmt: FormatType, documents: Any, data: st.DataObject
) -> None:
    _round_trip(fmt, data.draw(documents))


@pytest.mark.parametrize("fmt", [JSON, TOML, YAML], ids=lambda f: f.name)
def test_rich_dump_is_pretty_with_a_trailing_newline(fmt: FormatType) -> None:
    assert fmt.dump is not None
    text = fmt.dump({"a": {"b": 1, "c": [1, 2]}, "d": "x"})
    assert text.endswith("\n")
    assert len(text.splitlines()) > 1
