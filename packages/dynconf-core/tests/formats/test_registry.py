"""parse_text / dump_document go through the process registry, like third-party formats."""

from __future__ import annotations

import pytest

from dynconf.document import Document
from dynconf.errors import BackendError, Origin
from dynconf.formats import BUILTIN_FORMATS, dump_document, parse_text
from dynconf.plugins import FormatType, Registry


def test_builtin_formats_cover_the_contract_names_and_extensions() -> None:
    names = {fmt.name: fmt.extensions for fmt in BUILTIN_FORMATS}
    assert names == {
        "json": ("json",),
        "toml": ("toml",),
        "yaml": ("yaml", "yml"),
        "ini": ("ini",),
        "properties": ("properties",),
        "env": ("env",),
    }
    assert {fmt.name for fmt in BUILTIN_FORMATS if fmt.flat} == {"ini", "properties", "env"}


@pytest.mark.usefixtures("registry")
def test_parse_text_and_dump_document_use_the_named_format() -> None:
    text = dump_document({"a": {"b": 1}}, "toml")
    assert parse_text(text, "TOML", Origin.inline()) == {"a": {"b": 1}}


def test_a_registered_third_party_format_is_used_the_same_way(registry: Registry) -> None:
    def parse(text: str, origin: Origin) -> Document:
        key, _, value = text.partition(":")
        return {key: value}

    registry.formats["colon"] = FormatType(name="colon", extensions=("colon",), parse=parse)
    assert parse_text("k:v", "colon") == {"k": "v"}
    with pytest.raises(BackendError, match="can be read but not written"):
        dump_document({"k": "v"}, "colon")


@pytest.mark.usefixtures("registry")
def test_an_unknown_format_name_lists_the_known_ones() -> None:
    with pytest.raises(BackendError, match="json"):
        parse_text("{}", "json6")
