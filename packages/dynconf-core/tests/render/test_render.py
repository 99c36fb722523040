"""One output's bytes: sections, formats by extension, templates, the size ceiling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynconf.errors import BackendError, InvalidError, MissingError, TypeMismatchError
from dynconf.render import (
    OutputSpec,
    TemplateSource,
    check_size,
    render_output,
    select_section,
)

DOC = {"$schema": "./s.json", "app": {"db": {"host": "h", "port": 5432}, "name": "x"}}


def test_format_follows_the_extension(tmp_path: Path) -> None:
    data = render_output(DOC, OutputSpec(path=tmp_path / "out.json", section="app"))
    assert json.loads(data) == DOC["app"]


def test_format_override_names_a_format_for_an_extensionless_file(tmp_path: Path) -> None:
    data = render_output(DOC, OutputSpec(path=tmp_path / "config", section="app", format="json"))
    assert json.loads(data) == DOC["app"]


def test_whole_document_drops_the_schema_annotation(tmp_path: Path) -> None:
    data = render_output(DOC, OutputSpec(path=tmp_path / "out.json"))
    assert json.loads(data) == {"app": DOC["app"]}


def test_section_may_be_a_dotted_path() -> None:
    assert select_section(DOC, "app.db") == {"host": "h", "port": 5432}


def test_missing_section_is_named() -> None:
    with pytest.raises(MissingError, match=r"the section `app\.cache` is not in the document"):
        select_section(DOC, "app.cache")


def test_a_section_must_be_a_table() -> None:
    with pytest.raises(TypeMismatchError, match=r"`app\.name` is a scalar, not a table"):
        select_section(DOC, "app.name")


def test_unknown_extension_without_template_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as caught:
        render_output(DOC, OutputSpec(path=tmp_path / "app.conf"))
    message = str(caught.value)
    assert "app.conf" in message
    assert ".json" in message
    assert ".yaml" in message
    assert "template" in message


def test_a_template_frees_the_extension(tmp_path: Path) -> None:
    spec = OutputSpec(
        path=tmp_path / "app.conf",
        section="app",
        template=TemplateSource.inline("host={{ db.host }}\n"),
    )
    assert render_output(DOC, spec) == b"host=h\n"


def test_template_source_is_inline_or_file_not_both(tmp_path: Path) -> None:
    with pytest.raises(BackendError):
        TemplateSource(text="x", path=tmp_path / "t")
    with pytest.raises(BackendError):
        TemplateSource()


def test_size_ceiling_message_names_both_numbers_and_the_flag() -> None:
    check_size("x" * 10, ceiling=10)
    with pytest.raises(InvalidError) as caught:
        check_size("é" * 6, ceiling=10)
    assert str(caught.value).startswith(
        "the store answered with 12 bytes, past the 10-byte ceiling; raise it with "
        "--max-document-bytes"
    )
