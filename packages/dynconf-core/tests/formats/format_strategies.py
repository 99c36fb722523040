"""Hypothesis strategies for documents each format can hold.

Flat-format strings lean on the cases that break emitters: text that looks like a
number or a boolean, quotes, separators, backslashes, line breaks, Unicode whitespace,
empty strings and surrounding spaces.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import strategies as st

from dynconf.formats._flat import WHITESPACE

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1

CHARS = st.characters(exclude_categories=("Cs",))
TRICKY_STRINGS = [
    "",
    " ",
    "  x  ",
    "true",
    "false",
    "True",
    "FALSE",
    "1",
    "-1",
    "+1",
    "01",
    "-0",
    "1.10",
    "1.",
    ".5",
    "-0.0",
    "1e5",
    "1E5",
    "1e+16",
    "inf",
    "-inf",
    "+inf",
    "NaN",
    "nan",
    "Infinity",
    "0x1F",
    "0o17",
    "1_000",
    " 5",
    "5 ",
    "9223372036854775808",
    "18446744073709551616",
    '"',
    '""',
    '"x"',
    "'x'",
    "'",
    "a=b",
    "a:b",
    "=",
    ":",
    "#c",
    "!c",
    ";c",
    "[s]",
    "[",
    "]",
    "\\",
    "a\\",
    "\\\\",
    "\\n",
    "\\u0041",
    "x\ny",
    "\r",
    "\r\n",
    "\t",
    "\x0c",
    "\x0b",
    "\x00",
    "\x7f",
    "\x85",
    "\u2028",
    "\u3000",
    "\ufeff",
    "é",
    "日本",
    "😀",
    "[1, 2]",
    "{a=1}",
    "{}",
    "[]",
    "null",
    "~",
    "yes",
    "on",
    "2024-01-01",
    "07:32:00",
    "${HOME}",
    "export X",
    "'\"a\"'",
]
TRICKY = st.sampled_from(TRICKY_STRINGS)
NUMBERISH = st.from_regex(r"\A[+-]?[0-9]{0,4}(\.[0-9]{0,3})?([eE][+-]?[0-9]{1,3})?\Z")
PLAIN = st.text(CHARS, max_size=12)
STRINGS = st.one_of(
    PLAIN,
    TRICKY,
    NUMBERISH,
    st.builds(lambda a, b: a + b, TRICKY, st.one_of(TRICKY, PLAIN)),
    st.builds(lambda w, s: w + s + w, st.sampled_from([" ", "\t", "\u3000"]), PLAIN),
)
I64 = st.integers(I64_MIN, I64_MAX)
ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
FINITE_FLOAT = st.floats(allow_nan=False, allow_infinity=False)


def _tables(
    keys: st.SearchStrategy[str], leaves: st.SearchStrategy[Any], *, min_size: int = 0
) -> Any:
    return st.recursive(
        st.dictionaries(keys, leaves, min_size=min_size, max_size=4),
        lambda inner: st.dictionaries(
            keys, st.one_of(leaves, inner), min_size=min_size, max_size=4
        ),
        max_leaves=12,
    )


def _rich_values(scalars: st.SearchStrategy[Any]) -> Any:
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(PLAIN, inner, max_size=4)
        ),
        max_leaves=16,
    )


def json_documents() -> Any:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), FINITE_FLOAT, STRINGS)
    return st.dictionaries(PLAIN, _rich_values(scalars), max_size=5)


def toml_documents() -> Any:
    scalars = st.one_of(st.booleans(), I64, ANY_FLOAT, STRINGS)
    return st.dictionaries(PLAIN, _rich_values(scalars), max_size=5)


def yaml_documents() -> Any:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), ANY_FLOAT, STRINGS)
    return st.dictionaries(st.one_of(PLAIN, TRICKY), _rich_values(scalars), max_size=5)


def _ini_key_ok(key: str) -> bool:
    return bool(key) and key.strip(WHITESPACE) == key and key[0] not in ";#["


INI_KEYS = st.one_of(
    st.sampled_from(["a", "db", "host", "x y", "ключ", "a-b_c", "1", "]", "k]"]),
    st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters=".=\n\r"),
        min_size=1,
        max_size=8,
    ),
).filter(_ini_key_ok)


def ini_documents() -> Any:
    strings = STRINGS.filter(lambda s: "\n" not in s and "\r" not in s)
    scalars = st.one_of(st.booleans(), I64, ANY_FLOAT, strings)
    return st.dictionaries(INI_KEYS, st.one_of(scalars, _tables(INI_KEYS, scalars)), max_size=5)


PROPERTIES_KEYS = st.one_of(
    st.sampled_from(["a", "db", " lead", "trail ", "a=b", "a:b", "#x", "!x", "\\", "x\ny"]),
    st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters="."), min_size=1, max_size=8
    ),
)


def properties_documents() -> Any:
    scalars = st.one_of(st.booleans(), I64, ANY_FLOAT, STRINGS)
    return _tables(PROPERTIES_KEYS, scalars, min_size=1) | st.just({})


ENV_KEYS = st.from_regex(r"\A[a-z0-9]{1,4}(_[a-z0-9]{1,3}){0,2}\Z")


def env_documents() -> Any:
    """What a .env line carries to a shell: no line breaks or other control characters."""
    line_strings = STRINGS.filter(lambda text: not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", text))
    scalars = st.one_of(st.booleans(), st.integers(I64_MIN, U64_MAX), FINITE_FLOAT, line_strings)
    return _tables(ENV_KEYS, scalars)
