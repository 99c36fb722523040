"""Hostile documents of a few kilobytes end in one typed refusal, never a crash.

Each attack of issue 14.5, in every format that can spell it, parsed and written: nesting
past :data:`MAX_DEPTH` (``RecursionError`` before), an integer of 4,301 digits (Python's
int-to-text ``ValueError``), a lone surrogate (``UnicodeEncodeError`` when written), and
TOML dotted keys 100,000 deep (gigabytes inside ``tomllib``). Every refusal is a
:class:`LimitError` that names the path and the limit.
"""

from __future__ import annotations

import math
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from format_strategies import toml_documents
from hypothesis import HealthCheck, given, settings

from dynconf.document import (
    Document,
    deep_copy,
    deep_merge,
    same_value,
    set_path,
    split_path,
    walk_leaves,
)
from dynconf.errors import LimitError, Origin
from dynconf.formats import BUILTIN_FORMATS, ENV, INI, JSON, PROPERTIES, TOML, YAML
from dynconf.formats._toml_scan import scan_tokens
from dynconf.limits import MAX_DEPTH, MAX_INTEGER_DIGITS
from dynconf.plugins import FormatType
from dynconf.render import OutputSpec, render_output

ORIGIN = Origin.remote("the store")
DEEP = 600
PAST = ".".join(["a"] * (MAX_DEPTH + 1))
"""The path every too-deep refusal below names: the first segment past the limit."""
DEPTH_LIMIT = f"past the limit of {MAX_DEPTH} levels"
DIGITS_LIMIT = f"more than {MAX_INTEGER_DIGITS} digits"
SURROGATE = "lone surrogate"
HUGE = "9" * 4301
SCAN_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _refused(call: Callable[[], object], path: str, limit: str) -> LimitError:
    with pytest.raises(LimitError) as caught:
        call()
    error = caught.value
    assert error.path == path
    assert limit in error.message
    assert "\n" not in str(error)
    str(error).encode("utf-8")  # the message itself is always writable
    return error


def _nested(depth: int, leaf: object = 1) -> Document:
    document: Document = {"a": leaf}
    for _ in range(depth - 1):
        document = {"a": document}
    return document


# --- parse: nesting ---------------------------------------------------------------

DEEP_TEXTS: list[tuple[FormatType, str]] = [
    (JSON, '{"a": ' * DEEP + "1" + "}" * DEEP),
    (YAML, '{"a": ' * DEEP + "1" + "}" * DEEP),
    (YAML, "".join(f"{'  ' * level}a:\n" for level in range(DEEP)) + "  " * DEEP + "a: 1\n"),
    (TOML, ".".join(["a"] * DEEP) + " = 1\n"),
    (TOML, "[" + ".".join(["a"] * DEEP) + "]\nx = 1\n"),
    (TOML, "a = " + "{a = " * (DEEP - 1) + "1" + "}" * (DEEP - 1) + "\n"),
    (INI, ".".join(["a"] * DEEP) + " = 1\n"),
    (INI, "[" + ".".join(["a"] * DEEP) + "]\nx = 1\n"),
    (PROPERTIES, ".".join(["a"] * DEEP) + " = 1\n"),
    (ENV, "__".join(["A"] * DEEP) + "=1\n"),
]


@pytest.mark.parametrize(
    ("fmt", "text"), DEEP_TEXTS, ids=[f"{fmt.name}-{i}" for i, (fmt, _) in enumerate(DEEP_TEXTS)]
)
def test_nesting_past_the_limit_is_refused_by_path(fmt: FormatType, text: str) -> None:
    assert len(text) < 8 * 1024 * 1024
    error = _refused(lambda: fmt.parse(text, ORIGIN), PAST, DEPTH_LIMIT)
    assert error.origin == ORIGIN


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        (JSON, '{"a": ' + "[" * DEEP + "]" * DEEP + "}"),
        (YAML, "a: " + "[" * DEEP + "]" * DEEP),
        (TOML, "a = " + "[" * DEEP + "]" * DEEP),
    ],
    ids=["json", "yaml", "toml"],
)
def test_nested_arrays_past_the_limit_are_refused_by_index(fmt: FormatType, text: str) -> None:
    _refused(lambda: fmt.parse(text, ORIGIN), "a" + "[0]" * MAX_DEPTH, DEPTH_LIMIT)


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        (JSON, "[" * 100_000 + "]" * 100_000),
        (YAML, "a: " + "[" * 100_000 + "]" * 100_000),
    ],
    ids=["json", "yaml"],
)
def test_nesting_past_what_the_parser_follows_is_still_a_limit_refusal(
    fmt: FormatType, text: str
) -> None:
    with pytest.raises(LimitError, match=DEPTH_LIMIT):
        fmt.parse(text, ORIGIN)


def _empty_at_the_limit(empty: list[Any] | dict[str, Any]) -> Document:
    """``a`` holding arrays nested until ``empty`` sits at a path of MAX_DEPTH segments."""
    value: Any = empty
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    return {"a": value}


@pytest.mark.parametrize("fmt", [JSON, YAML, TOML], ids=lambda f: f.name)
@pytest.mark.parametrize("empty", [[], {}], ids=["array", "table"])
def test_an_empty_container_at_the_limit_written_by_a_format_is_read_back_by_it(
    fmt: FormatType, empty: list[Any] | dict[str, Any]
) -> None:
    document = _empty_at_the_limit(empty)
    assert fmt.dump is not None
    assert same_value(fmt.parse(fmt.dump(document), ORIGIN), document)


def test_yaml_arrays_128_deep_convert_to_toml_and_read_back() -> None:
    document = YAML.parse("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH, ORIGIN)
    assert TOML.dump is not None
    assert same_value(TOML.parse(TOML.dump(document), ORIGIN), document)


@pytest.mark.parametrize("fmt", BUILTIN_FORMATS, ids=lambda f: f.name)
def test_nesting_at_the_limit_parses_and_writes(fmt: FormatType) -> None:
    document = _nested(MAX_DEPTH)
    assert fmt.dump is not None
    text = fmt.dump(document)
    assert same_value(fmt.parse(text, ORIGIN), document)


def test_toml_dotted_keys_100000_deep_are_refused_in_bounded_memory_and_time() -> None:
    text = ".".join(["a"] * 100_000) + " = 1\n"
    tracemalloc.start()
    started = time.monotonic()
    try:
        _refused(lambda: TOML.parse(text, ORIGIN), PAST, DEPTH_LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    assert peak < 4 * 1024 * 1024, f"peak {peak} bytes"
    assert elapsed < 2.0, f"{elapsed:.2f} s"


def test_toml_header_and_key_together_past_the_limit_are_refused_by_full_path() -> None:
    half = MAX_DEPTH // 2 + 1
    text = "[" + ".".join(["a"] * half) + "]\n" + ".".join(["a"] * half) + " = 1\n"
    _refused(lambda: TOML.parse(text, ORIGIN), PAST, DEPTH_LIMIT)


# --- parse: integer size ----------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        (JSON, f'{{"a": {HUGE}}}'),
        (JSON, f'{{"a": -{HUGE}}}'),
        (YAML, f"a: {HUGE}\n"),
        (YAML, f"a: 0x{'f' * 4301}\n"),
        (TOML, f"a = {HUGE}\n"),
        (TOML, f"a = 0x{'f' * 4301}\n"),
    ],
    ids=["json", "json-negative", "yaml", "yaml-hex", "toml", "toml-hex"],
)
def test_an_integer_past_the_digit_limit_is_refused_by_path(fmt: FormatType, text: str) -> None:
    _refused(lambda: fmt.parse(text, ORIGIN), "a", DIGITS_LIMIT)


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (f"x = [1, [2, {HUGE}]]\n", "x[1][1]"),
        (f"[t.u]\nv = {{w = {HUGE}}}\n", "t.u.v.w"),
    ],
)
def test_toml_names_the_path_of_a_long_integer_inside_arrays_and_tables(
    text: str, path: str
) -> None:
    _refused(lambda: TOML.parse(text, ORIGIN), path, DIGITS_LIMIT)


def test_toml_keeps_long_floats_and_digit_keys() -> None:
    text = f"a = 1.{'5' * 200}\n{'7' * 200} = 1\n"
    assert TOML.parse(text, ORIGIN)["7" * 200] == 1


def test_an_integer_at_the_digit_limit_is_kept() -> None:
    digits = "9" * MAX_INTEGER_DIGITS
    assert JSON.parse(f'{{"a": {digits}}}', ORIGIN) == {"a": int(digits)}
    assert YAML.parse(f"a: {digits}", ORIGIN) == {"a": int(digits)}


@pytest.mark.parametrize("fmt", [INI, PROPERTIES], ids=lambda f: f.name)
def test_flat_formats_widen_a_huge_integer_to_a_float_as_the_reference_does(
    fmt: FormatType,
) -> None:
    assert fmt.parse(f"a = {HUGE}\n", ORIGIN) == {"a": math.inf}
    assert fmt.parse(f"a = {'0' * 5000}7\n", ORIGIN) == {"a": 7}


def test_env_keeps_a_huge_integer_as_text() -> None:
    assert ENV.parse(f"A={HUGE}\nB={'0' * 5000}7\n", ORIGIN) == {"a": HUGE, "b": 7}


# --- parse: lone surrogates -------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "text", "path"),
    [
        (JSON, '{"a": "x\\ud800"}', "a"),
        (JSON, '{"a": {"k\\udfff": 1}}', "a.k\udfff"),
        (PROPERTIES, "a = \\ud800\n", "a"),
        (PROPERTIES, "a = \\ude00\\ud83d\n", "a"),
        (TOML, 'a = "\ud800"\n', "a"),
        (INI, "a = \ud800\n", "a"),
        (ENV, "A=\ud800\n", "a"),
    ],
    ids=["json", "json-key", "properties", "properties-reversed-pair", "toml", "ini", "env"],
)
def test_a_lone_surrogate_is_refused_by_path(fmt: FormatType, text: str, path: str) -> None:
    _refused(lambda: fmt.parse(text, ORIGIN), path, SURROGATE)


def test_yaml_refuses_a_lone_surrogate_in_its_text_by_line() -> None:
    with pytest.raises(LimitError, match="line 2 holds a lone surrogate"):
        YAML.parse("a: 1\nb: \ud800\n", ORIGIN)


# --- write: documents built in Python ---------------------------------------------


@pytest.mark.parametrize("fmt", BUILTIN_FORMATS, ids=lambda f: f.name)
def test_every_writer_refuses_nesting_past_the_limit(fmt: FormatType) -> None:
    assert fmt.dump is not None
    dump = fmt.dump
    _refused(lambda: dump(_nested(DEEP)), PAST, DEPTH_LIMIT)


@pytest.mark.parametrize("fmt", BUILTIN_FORMATS, ids=lambda f: f.name)
def test_every_writer_refuses_a_huge_integer(fmt: FormatType) -> None:
    assert fmt.dump is not None
    dump = fmt.dump
    _refused(lambda: dump({"a": {"b": 10**4300}}), "a.b", DIGITS_LIMIT)


@pytest.mark.parametrize("fmt", BUILTIN_FORMATS, ids=lambda f: f.name)
@pytest.mark.parametrize(
    ("document", "path"),
    [({"a": {"b": "x\ud800"}}, "a.b"), ({"a": {"b\udc00": "x"}}, "a.b\udc00")],
    ids=["value", "key"],
)
def test_every_writer_refuses_a_lone_surrogate(
    fmt: FormatType, document: Document, path: str
) -> None:
    assert fmt.dump is not None
    dump = fmt.dump
    _refused(lambda: dump(document), path, SURROGATE)


@pytest.mark.parametrize("name", ["out.json", "out.properties", "out.yaml"])
def test_render_output_refuses_instead_of_failing_to_encode(name: str) -> None:
    spec = OutputSpec(path=Path(name))
    _refused(lambda: render_output({"a": "\ud800"}, spec), "a", SURROGATE)


# --- document helpers -------------------------------------------------------------


def test_document_walkers_are_iterative() -> None:
    depth = sys.getrecursionlimit() * 3
    deep = _nested(depth)
    copied = deep_copy(deep)
    assert same_value(copied, deep)
    assert copied["a"] is not deep["a"]
    merged = deep_merge(deep_copy(deep), _nested(depth, 2))
    assert not same_value(merged, deep)
    assert [path.count(".") + 1 for path, _ in walk_leaves(deep)] == [depth]


def test_a_dotted_path_past_the_limit_is_refused() -> None:
    long_path = ".".join(["a"] * DEEP)
    _refused(lambda: split_path(long_path), PAST, "more than")
    with pytest.raises(LimitError):
        set_path({}, long_path, 1)


@SCAN_SETTINGS
@given(document=toml_documents())
def test_the_toml_token_scan_passes_every_document_within_the_limits(document: Document) -> None:
    scan_tokens(tomli_w.dumps(document), ORIGIN)


@pytest.mark.parametrize("build", [_nested, lambda depth: {"t": _nested(depth - 2, [1])}])
def test_the_toml_token_scan_names_the_first_path_past_the_limit(
    build: Callable[[int], Document],
) -> None:
    scan_tokens(tomli_w.dumps(build(MAX_DEPTH)), ORIGIN)
    with pytest.raises(LimitError, match=DEPTH_LIMIT):
        scan_tokens(tomli_w.dumps(build(MAX_DEPTH + 1)), ORIGIN)
