"""JSON, TOML and YAML: their own types, safe errors, and what each refuses to write."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from dynconf.document import same_value
from dynconf.errors import Origin, ParseError, TypeMismatchError
from dynconf.formats import json_, toml_, yaml_

ORIGIN = Origin.file("/etc/app/config")
SECRET = "hunter2-s3cr3t"


# --- JSON ---------------------------------------------------------------------------


def test_json_keeps_int_float_and_bool_apart() -> None:
    doc = json_.parse('{"i": 1, "f": 1.0, "b": true, "n": null, "l": [1, "x"]}', ORIGIN)
    assert same_value(doc, {"i": 1, "f": 1.0, "b": True, "n": None, "l": [1, "x"]})


@pytest.mark.parametrize("text", ["", "  \n\t"])
def test_json_blank_text_is_an_empty_table(text: str) -> None:
    assert json_.parse(text, ORIGIN) == {}


def test_json_top_level_array_is_refused() -> None:
    with pytest.raises(ParseError, match="must be a table"):
        json_.parse("[1, 2]", ORIGIN)


def test_json_error_gives_line_and_column_but_no_text() -> None:
    with pytest.raises(ParseError) as caught:
        json_.parse('{\n  "password": "' + SECRET + '"\n  "x": 1}', ORIGIN)
    message = str(caught.value)
    assert message.startswith("JSON parse error at line 3, column 3:")
    assert SECRET not in message
    assert "\n" not in message
    assert caught.value.origin == ORIGIN


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": -Infinity}', '{"a": 1e400}'])
def test_json_numbers_other_readers_refuse_are_refused(text: str) -> None:
    with pytest.raises(ParseError):
        json_.parse(text, ORIGIN)


def test_json_dump_is_pretty_with_trailing_newline() -> None:
    assert json_.dump({"a": {"b": "é"}}) == '{\n  "a": {\n    "b": "é"\n  }\n}\n'


def test_json_dump_refuses_non_finite_floats_by_path() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        json_.dump({"a": {"b": [1.0, math.inf]}})
    assert caught.value.path == "a.b[1]"


def test_json_dump_refuses_values_outside_the_model_by_path() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        json_.dump({"when": {"at": dt.date(2024, 1, 1)}})
    assert caught.value.path == "when.at"
    assert "2024" not in str(caught.value)


# --- TOML ---------------------------------------------------------------------------


def test_toml_datetimes_become_their_rfc3339_strings() -> None:
    doc = toml_.parse(
        "a = 1979-05-27 07:32:00.120+00:00\n"
        "b = 1979-05-27T00:32:00-07:00\n"
        "c = 1979-05-27T07:32:00\n"
        "d = 1979-05-27\n"
        "e = 07:32:00\n"
        "f = [1979-05-27]\n",
        ORIGIN,
    )
    assert doc == {
        "a": "1979-05-27T07:32:00.12Z",
        "b": "1979-05-27T00:32:00-07:00",
        "c": "1979-05-27T07:32:00",
        "d": "1979-05-27",
        "e": "07:32:00",
        "f": ["1979-05-27"],
    }


def test_toml_error_has_line_and_column_and_no_text() -> None:
    with pytest.raises(ParseError) as caught:
        toml_.parse(f'a = 1\npassword = "{SECRET}\n', ORIGIN)
    message = str(caught.value)
    assert message.startswith("TOML parse error at line 2, column ")
    assert SECRET not in message


@pytest.mark.parametrize(
    "text",
    [
        f"[{SECRET}]\n[{SECRET}]\n",
        f"a = {{ {SECRET} = 1, {SECRET} = 2 }}\n",
        f'a = "{SECRET}\x01"\n',
        f"a = 1 {SECRET}\n",
    ],
)
def test_toml_errors_quoting_the_input_are_reworded(text: str) -> None:
    with pytest.raises(ParseError) as caught:
        toml_.parse(text, ORIGIN)
    assert SECRET not in str(caught.value)
    assert str(caught.value).startswith("TOML parse error at line ")


def test_toml_dump_refuses_null_by_path() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        toml_.dump({"a": {"b": None}})
    assert caught.value.path == "a.b"


def test_toml_dump_refuses_integers_past_64_bits() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        toml_.dump({"big": 2**63})
    assert caught.value.path == "big"


@pytest.mark.parametrize(
    ("text", "path"),
    [("a = 9223372036854775808\n", "a"), ("[t]\nb = [1, -9223372036854775809]\n", "t.b[1]")],
)
def test_toml_parse_refuses_integers_past_64_bits_by_path(text: str, path: str) -> None:
    with pytest.raises(ParseError, match="outside the 64-bit range") as caught:
        toml_.parse(text, ORIGIN)
    assert caught.value.path == path


def test_toml_parse_keeps_the_64_bit_bounds() -> None:
    text = "hi = 9223372036854775807\nlo = -9223372036854775808\n"
    assert toml_.parse(text, ORIGIN) == {"hi": 2**63 - 1, "lo": -(2**63)}


def test_toml_keeps_non_finite_floats() -> None:
    doc = toml_.parse(toml_.dump({"a": math.inf, "b": -0.0}), ORIGIN)
    assert same_value(doc, {"a": math.inf, "b": -0.0})


# --- YAML ---------------------------------------------------------------------------


def test_yaml_reads_the_1_2_core_schema() -> None:
    doc = yaml_.parse(
        "a: yes\nb: on\nc: 0o17\nd: 0x1F\ne: 1e5\nf: .inf\ng: ~\nh:\ni: 010\nj: 1_000\nk: True\n",
        ORIGIN,
    )
    assert same_value(
        doc,
        {
            "a": "yes",
            "b": "on",
            "c": 15,
            "d": 31,
            "e": 100000.0,
            "f": math.inf,
            "g": None,
            "h": None,
            "i": 10,
            "j": "1_000",
            "k": True,
        },
    )


def test_yaml_dates_stay_the_string_as_written() -> None:
    doc = yaml_.parse("a: 2024-01-01\nb: !!timestamp 2001-12-14 21:59:43.10 -5\n", ORIGIN)
    assert doc == {"a": "2024-01-01", "b": "2001-12-14 21:59:43.10 -5"}


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("a:\n  b: !!binary aGVsbG8=\n", "a.b"),
        ("a: [1, !!set {x}]\n", "a[1]"),
        ("a: !!omap [x: 1]\n", "a"),
    ],
)
def test_yaml_values_outside_the_model_are_refused_by_path(text: str, path: str) -> None:
    with pytest.raises(ParseError) as caught:
        yaml_.parse(text, ORIGIN)
    assert caught.value.path == path


@pytest.mark.parametrize("text", ["1: x\n", "a:\n  true: x\n", "? [a]\n: x\n"])
def test_yaml_keys_must_be_strings(text: str) -> None:
    with pytest.raises(ParseError):
        yaml_.parse(text, ORIGIN)


def test_yaml_aliases_become_independent_copies() -> None:
    doc = yaml_.parse("a: &x {k: 1}\nb: *x\n", ORIGIN)
    doc["a"]["k"] = 2
    assert doc["b"] == {"k": 1}


def test_yaml_recursive_alias_is_refused() -> None:
    with pytest.raises(ParseError, match="refers to itself"):
        yaml_.parse("a: &a [*a]\n", ORIGIN)


def test_yaml_alias_bomb_is_refused() -> None:
    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, 9):
        below = f"*l{level - 1}"
        lines.append(f"l{level}: &l{level} [{', '.join([below] * 10)}]")
    with pytest.raises(ParseError, match="past the limit"):
        yaml_.parse("\n".join(lines) + "\n", ORIGIN)


@pytest.mark.parametrize(
    "text",
    [
        f"a: '{SECRET}\n",
        f"a: {SECRET}\n b: {SECRET}: c\n",
        f'a: "\\q{SECRET}"\n',
        f"\t{SECRET}: 1\n",
    ],
)
def test_yaml_errors_never_contain_the_text(text: str) -> None:
    with pytest.raises(ParseError) as caught:
        yaml_.parse(text, ORIGIN)
    assert SECRET not in str(caught.value)
    assert str(caught.value).startswith("YAML parse error")


@pytest.mark.parametrize("depth", [600, 2000])
def test_yaml_deep_nesting_is_a_parse_error(depth: int) -> None:
    with pytest.raises(ParseError, match="nest"):
        yaml_.parse("a: " + "[" * depth + "]" * depth, ORIGIN)


def test_yaml_top_level_sequence_is_refused() -> None:
    with pytest.raises(ParseError, match="must be a table"):
        yaml_.parse("- a\n", ORIGIN)


def test_yaml_comment_only_text_is_an_empty_table() -> None:
    assert yaml_.parse("# nothing here\n", ORIGIN) == {}


def test_yaml_dump_quotes_strings_either_yaml_version_would_retype() -> None:
    text = yaml_.dump({"a": "yes", "b": "1e5", "c": "0o17", "d": "2024-01-01", "e": "x"})
    assert text == "a: 'yes'\nb: '1e5'\nc: '0o17'\nd: '2024-01-01'\ne: x\n"
