"""The ``dynconf resolve`` spec: fields, types, relative paths and the JSON rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynconf.errors import InvalidError, MissingError, ParseError, TypeMismatchError
from dynconf.spec import SPEC_FIELDS, load_spec, load_spec_file, render_resolved_json


def test_relative_paths_are_relative_to_the_spec(tmp_path: Path) -> None:
    spec_file = tmp_path / "case" / "spec.json"
    spec_file.parent.mkdir()
    spec_file.write_text(
        json.dumps(
            {
                "key": "app",
                "secrets_dir": "secrets",
                "env_files": [".env"],
                "extra_missing_file": "gone.toml",
            }
        ),
        encoding="utf-8",
    )
    spec = load_spec_file(spec_file)
    assert spec.files == [spec_file.parent / "config.toml", spec_file.parent / "gone.toml"]
    assert spec.secrets_dir == spec_file.parent / "secrets"
    assert spec.env_files == [spec_file.parent / ".env"]


def test_unknown_field_is_named_with_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(InvalidError) as caught:
        load_spec({"key": "app", "envprefix": "X_"}, base=tmp_path)
    assert caught.value.path == "envprefix"
    assert all(name in str(caught.value) for name in SPEC_FIELDS)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("key", 1, "a string"),
        ("files", "config.toml", "a list of strings"),
        ("whole_document", "yes", "true or false"),
        ("defaults", [1], "a JSON object"),
        ("env_files", [1], "a list of strings"),
    ],
)
def test_wrong_type_names_field_and_type(
    tmp_path: Path, field: str, value: object, expected: str
) -> None:
    raw = {"key": "app", field: value}
    with pytest.raises(TypeMismatchError) as caught:
        load_spec(raw, base=tmp_path)
    assert caught.value.path == field
    assert expected in str(caught.value)


def test_key_is_required(tmp_path: Path) -> None:
    with pytest.raises(MissingError, match="`key`"):
        load_spec({}, base=tmp_path)


def test_set_strings_are_text_typed_other_leaves_kept(tmp_path: Path) -> None:
    spec = load_spec(
        {"key": "app", "set": {"db": {"port": "5432", "on": True}, "empty": {}}}, base=tmp_path
    )
    assert spec.flags == {"db.port": 5432, "db.on": True}


def test_invalid_json_gives_a_position_not_text(tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text('{"key": "app", "secret-ish"}', encoding="utf-8")
    with pytest.raises(ParseError, match="line 1") as caught:
        load_spec_file(spec_file)
    assert "secret-ish" not in str(caught.value)


def test_rendering_sorts_keys_and_ends_with_a_newline() -> None:
    text = render_resolved_json({"b": 1, "a": {"d": 1.0, "c": True}})
    assert text == '{\n  "a": {\n    "c": true,\n    "d": 1.0\n  },\n  "b": 1\n}\n'
