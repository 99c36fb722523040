"""The text typing grammar (engine-contract §1.4), one behaviour per test."""

from __future__ import annotations

import pytest

from dynconf.text import MAX_DEPTH, type_text


def _typed(raw: str) -> object:
    value = type_text(raw)
    return (type(value).__name__, value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("false", False),
        ("  false  ", False),
        ("8080", 8080),
        (" 123 ", 123),
        ("-2", -2),
        ("-0", 0),
        ("+5", 5),
        ("18446744073709551615", 2**64 - 1),
        ("-9223372036854775808", -(2**63)),
    ],
)
def test_booleans_and_integers_are_typed(raw: str, expected: object) -> None:
    assert _typed(raw) == (type(expected).__name__, expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("2.5", 2.5), ("1.", 1.0), (".5", 0.5), ("-1.5e-3", -0.0015), ("1.e2", 100.0)],
)
def test_a_bare_word_with_a_dot_is_a_float(raw: str, expected: float) -> None:
    assert _typed(raw) == ("float", expected)


@pytest.mark.parametrize(
    "raw",
    [
        "1e5",
        "1_000",
        "1_0.5",
        "inf",
        "nan",
        "Infinity",
        "1.0.0",
        "18446744073709551616",
        "-9223372036854775809",
        "+",
        "-",
        "True",
        "0x10",
    ],
)
def test_words_rust_does_not_read_as_numbers_stay_strings(raw: str) -> None:
    assert _typed(raw) == ("str", raw)


def test_a_bare_word_comes_back_trimmed() -> None:
    assert type_text("   a b  ") == "a b"


@pytest.mark.parametrize("raw", ["truex", " truex ", "a,b", "1 ]", '["a"', "[truex]", "true false"])
def test_input_not_used_up_is_the_original_string(raw: str) -> None:
    assert type_text(raw) == raw


def test_arrays_nest_and_mix() -> None:
    assert type_text("[[ -1], {a=[ b ]},  hi ]") == [[-1], {"a": ["b"]}, "hi"]


def test_tables_take_quoted_and_bare_keys() -> None:
    assert type_text('{a=1, "b.c"=hi, d-e_f=[true]}') == {"a": 1, "b.c": "hi", "d-e_f": [True]}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("[]", []), ("{}", {}), ("[a,]", ["a"]), ("{a=1,}", {"a": 1})],
)
def test_trailing_comma_and_empty_collections(raw: str, expected: object) -> None:
    assert type_text(raw) == expected


def test_whitespace_before_a_closing_bracket_reads_an_empty_word() -> None:
    assert type_text("[ ]") == [""]
    assert type_text("[a, ]") == ["a", ""]
    assert type_text("{ }") == "{ }"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"\\ \b \f \n \r \t"', "\\ \b \f \n \r \t"),
        (r'"\u00e9"', "é"),
        (r'"\U0001F600"', "😀"),
        ('" padded "', " padded "),
        ('"8080"', "8080"),
        ('"true"', "true"),
        ('"a\tb"', "a\tb"),
    ],
)
def test_quoted_strings_take_json_like_escapes(raw: str, expected: str) -> None:
    assert type_text(raw) == expected


@pytest.mark.parametrize("raw", [r'"\/"', r'"\x41"', r'"\u12"', r'"\ud800"', '"a\x01b"', '"a\x7f"'])
def test_a_bad_escape_or_control_character_keeps_the_raw_input(raw: str) -> None:
    assert type_text(raw) == raw


def test_single_quotes_hold_exactly_one_character() -> None:
    assert type_text("'x'") == "x"
    assert type_text("'xy'") == "'xy'"
    assert type_text("''") == "''"


def test_nesting_up_to_the_limit_is_read() -> None:
    raw = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = type_text(raw)
    for _ in range(MAX_DEPTH - 1):
        assert isinstance(value, list)
        value = value[0]
    assert value == []


def test_nesting_past_the_limit_stays_a_string() -> None:
    raw = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    assert type_text(raw) == raw


def test_empty_input_is_an_empty_string() -> None:
    assert type_text("") == ""
