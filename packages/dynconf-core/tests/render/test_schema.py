"""JSON Schema checks: paths and rules in the message, never values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dynconf.errors import InvalidError, IoError, Origin, ParseError
from dynconf.schema import check_schema, load_schema

SCHEMA_FILE = Origin.file("/etc/dynconf/schema.json")
SECRET = "s3cr3t-value-never-shown"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["host"],
    "properties": {
        "host": {"type": "string"},
        "port": {"type": "integer", "maximum": 65535},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def refusal(document: dict[str, Any], schema: dict[str, Any] = SCHEMA) -> InvalidError:
    with pytest.raises(InvalidError) as caught:
        check_schema(document, schema, origin=SCHEMA_FILE)
    assert SECRET not in str(caught.value)
    return caught.value


def test_a_satisfying_document_passes() -> None:
    check_schema({"host": "h", "port": 80}, SCHEMA, origin=SCHEMA_FILE)


def test_message_names_instance_and_schema_paths() -> None:
    error = refusal({"host": "h", "port": SECRET})
    assert error.message == (
        "the document does not satisfy the schema: /port does not satisfy /properties/port/type"
    )
    assert error.path == "port"
    assert error.errors == [
        {
            "path": "port",
            "instance_pointer": "/port",
            "schema_pointer": "/properties/port/type",
            "rule": "type",
        }
    ]


def test_empty_instance_path_is_the_document_and_missing_names_are_listed() -> None:
    error = refusal({"port": 1})
    assert error.message == (
        "the document does not satisfy the schema: the document does not satisfy /required "
        "(`host` missing)"
    )


def test_array_items_are_named_by_index() -> None:
    error = refusal({"host": "h", "tags": ["ok", 7]})
    assert "/tags/1 does not satisfy /properties/tags/items/type" in error.message


def test_errors_are_separated_and_cut_at_five() -> None:
    schema = {"type": "object", "properties": {f"k{i}": {"type": "string"} for i in range(7)}}
    error = refusal({f"k{i}": i for i in range(7)}, schema)
    listed = error.message.split(": ", 1)[1].split("; ")
    assert listed[:5] == [f"/k{i} does not satisfy /properties/k{i}/type" for i in range(5)]
    assert listed[5] == "and 2 more"
    assert len(error.errors) == 7


def test_message_never_carries_values() -> None:
    schema = {"type": "object", "properties": {"a": {"enum": ["x"]}, "b": {"maxLength": 2}}}
    refusal({"a": SECRET, "b": SECRET}, schema)


def test_draft_comes_from_dollar_schema() -> None:
    # A boolean exclusiveMaximum is draft-04 only; 2020-12 (the default) rejects the schema.
    rule = {"properties": {"n": {"maximum": 10, "exclusiveMaximum": True}}}
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", **rule}
    check_schema({"n": 9}, draft4, origin=SCHEMA_FILE)
    error = refusal({"n": 10}, draft4)
    assert "/n does not satisfy /properties/n/maximum" in error.message
    with pytest.raises(InvalidError, match="the schema itself is invalid"):
        check_schema({}, rule, origin=SCHEMA_FILE)


def test_invalid_schema_names_the_schema_file() -> None:
    with pytest.raises(InvalidError) as caught:
        check_schema({}, {"type": 5}, origin=SCHEMA_FILE)
    assert str(caught.value).startswith("the schema itself is invalid: /type does not satisfy")
    assert "/etc/dynconf/schema.json" in str(caught.value)


def test_unknown_draft_is_refused() -> None:
    with pytest.raises(InvalidError, match="names no JSON Schema draft"):
        check_schema({}, {"$schema": "https://example.invalid/s"}, origin=SCHEMA_FILE)


def test_remote_reference_is_refused_not_fetched() -> None:
    with pytest.raises(InvalidError, match="nothing is fetched"):
        check_schema({}, {"$ref": "https://example.invalid/x.json"}, origin=SCHEMA_FILE)


def test_load_schema_reads_json_and_yaml(tmp_path: Path) -> None:
    as_json = tmp_path / "s.json"
    as_json.write_text(json.dumps(SCHEMA), encoding="utf-8")
    as_yaml = tmp_path / "s.yaml"
    as_yaml.write_text("type: object\nrequired: [host]\n", encoding="utf-8")
    assert load_schema(as_json) == SCHEMA
    assert load_schema(as_yaml) == {"type": "object", "required": ["host"]}


def test_load_schema_errors_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "s.json"
    broken.write_text('{"type": ', encoding="utf-8")
    with pytest.raises(ParseError, match="line 1") as caught:
        load_schema(broken)
    assert str(broken) in str(caught.value)
    with pytest.raises(IoError, match="does not exist"):
        load_schema(tmp_path / "missing.json")
    listed = tmp_path / "list.json"
    listed.write_text("[]", encoding="utf-8")
    with pytest.raises(ParseError, match="one JSON Schema object"):
        load_schema(listed)
