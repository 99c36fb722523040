"""Documents in every format: parsing is total, bounded and typed; rendering refuses by type.

Issue 14 item 5: a 3-4 KB store document (600-deep JSON, a 4,301-digit integer, a lone
surrogate, 600-deep properties/env keys, 100,000-deep TOML dotted keys) raised
``RecursionError``/``ValueError``/``UnicodeError`` or took gigabytes, and crashed every agent
that served it. The promise: parse answers a document or raises a ``dynconf.errors`` error
(whose message carries no document text), within a time and memory bound; whatever parses
renders into every format or is refused with the typed error; and a dumper writes only text
its own parser reads back as the same document (``dynconf.formats``' own contract).

Each example runs in the bounded worker (:class:`tests.fuzz.support.Bounded`).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.profiles import EXAMPLE_SECONDS, fuzz_settings
from tests.fuzz.support import SECRET, MiB, Violation, is_typed, leaked, require, worker
from tests.fuzz.workloads import FORMATS, parse_and_render

pytestmark = pytest.mark.fuzz

PEAK_LIMIT = 256 * MiB
"""Far above what a < 100 KB document needs; issue 14's TOML case peaked at 3 GiB."""

DEPTHS = st.one_of(
    st.sampled_from([32, 64, 100, 128, 255, 256, 500, 600, 999, 1000, 1001, 2000, 3000]),
    st.integers(1, 3000),
)
DIGITS = st.one_of(
    st.sampled_from([19, 20, 300, 640, 4300, 4301, 4302, 5000, 20000]),
    st.integers(1, 20000),
)
HOSTILE_CHARS = st.sampled_from(
    ["\ud800", "\udfff", "\ud83d", "\x00", "\ufeff", "\x1b", "\r", "\u2028", "\x85", "\uffff"]
)
ANY_TEXT = st.text(st.characters(), max_size=200)


def _nest(open_: str, close: str, inner: str, depth: int) -> str:
    return open_ * depth + inner + close * depth


@st.composite
def _big_number(draw: st.DrawFn) -> str:
    digits = "9" * draw(DIGITS)
    return draw(
        st.sampled_from(
            [digits, "-" + digits, "1" + digits, "1." + digits, "1e" + digits, "0." + digits]
        )
    )


@st.composite
def _json_value(draw: st.DrawFn) -> str:
    depth = draw(DEPTHS)
    char = draw(HOSTILE_CHARS)
    return draw(
        st.sampled_from(
            [
                _nest("[", "]", "", depth),
                _nest('{"a":', "}", "1", depth),
                _nest("[", "]", "1", depth).replace("[", "[1,", 1),
                draw(_big_number()),
                '"\\ud800"',
                '"\\udfff\\ud800"',
                f'"{char}"',
                '"\\u0000"',
                f'{{"{char}": 1}}',
            ]
        )
    )


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    value = draw(_json_value())
    return draw(
        st.sampled_from(
            [f'{{"p": "{SECRET}", "a": {value}}}', f'{{"a": {value}}}', value, "\ufeff" + value]
        )
    )


@st.composite
def yaml_texts(draw: st.DrawFn) -> str:
    depth = draw(DEPTHS)
    char = draw(HOSTILE_CHARS)
    value = draw(
        st.sampled_from(
            [
                "a: " + _nest("[", "]", "", depth),
                "a: " + _nest("{a: ", "}", "1", depth),
                "".join(" " * i + "a:\n" for i in range(min(depth, 400))) + " " * 401 + "b: 1",
                "".join("  " * i + "- \n" for i in range(min(depth, 400))),
                "a: " + draw(_big_number()),
                "a: 0x" + "f" * draw(DIGITS),
                "a: " + "1_" * min(draw(DIGITS), 5000) + "1",
                'a: "\\ud800"',
                'a: "\\U0001F600\\udfff"',
                f"a: {char}",
                f'"{char}": 1',
                "a: &x [1, 2]\nb: [*x, *x, *x]\nc: [*x, *x]",
                "a: !!python/object/apply:os.system ['true']",
                "a: !!binary aGVsbG8=",
                "a: !!timestamp 2001-12-14",
                "a: !!set {x, y}",
                "? [1, 2]\n: v",
                "a: *undefined",
                "\ufeffa: 1",
            ]
        )
    )
    return draw(st.sampled_from([f"p: {SECRET}\n{value}", value]))


@st.composite
def toml_texts(draw: st.DrawFn) -> str:
    depth = draw(DEPTHS)
    char = draw(HOSTILE_CHARS)
    value = draw(
        st.sampled_from(
            [
                "a" + ".a" * depth + " = 1",
                "[" + ".".join(["t"] * depth) + "]\nk = 1",
                "a = " + _nest("[", "]", "", depth),
                "a = " + _nest("{a = ", "}", "1", depth),
                "a = " + draw(_big_number()),
                "a = 0x" + "f" * draw(DIGITS),
                'a = "\\ud800"',
                'a = "\\U0010FFFF"',
                f'a = "{char}"',
                f'"{char}" = 1',
                "\ufeffa = 1",
                "a = 1979-05-27T07:32:00Z",
                "a = nan\nb = -inf",
            ]
        )
    )
    return draw(st.sampled_from([f'p = "{SECRET}"\n{value}', value]))


@st.composite
def ini_texts(draw: st.DrawFn) -> str:
    depth = draw(DEPTHS)
    char = draw(HOSTILE_CHARS)
    value = draw(
        st.sampled_from(
            [
                "[s]\n" + "a" + ".a" * depth + " = 1",
                "[" + ".".join(["a"] * depth) + "]\nk = 1",
                "[s]\nk = " + draw(_big_number()),
                f"[s]\nk = {char}",
                f"[{char}]\nk = 1",
                f"[s]\n{char} = 1",
                '[s]\nk = "\\ud800"',
                "\ufeff[s]\nk = 1",
            ]
        )
    )
    return draw(st.sampled_from([f"[secret]\np = {SECRET}\n{value}", value]))


@st.composite
def properties_texts(draw: st.DrawFn) -> str:
    depth = draw(DEPTHS)
    char = draw(HOSTILE_CHARS)
    value = draw(
        st.sampled_from(
            [
                "a" + ".a" * depth + "=1",
                "k=" + draw(_big_number()),
                "k=\\uD800",
                "k=\\uDFFF\\uD800",
                "k=\\u0000",
                "k=\\u12",
                f"k={char}",
                f"{char}=1",
                "k=" + "\\\n" * depth + "v",
                "\ufeffk=1",
            ]
        )
    )
    return draw(st.sampled_from([f"p={SECRET}\n{value}", value]))


@st.composite
def env_texts(draw: st.DrawFn) -> str:
    depth = draw(DEPTHS)
    char = draw(HOSTILE_CHARS)
    value = draw(
        st.sampled_from(
            [
                "A" + "__A" * depth + "=1",
                "A=" + _nest("[", "]", "", depth),
                "A=" + _nest("[", "]", "1", depth),
                "A=" + _nest('{"a":', "}", "1", depth),
                "A=" + draw(_big_number()),
                f"A={char}",
                f"{char}=1",
                'A="\\ud800"',
                "A='\\ud800'",
                "\ufeffA=1",
                "export A" + "__B" * depth + "=x",
            ]
        )
    )
    return draw(st.sampled_from([f"P={SECRET}\n{value}", value]))


_HOSTILE = {
    "json": json_texts(),
    "yaml": yaml_texts(),
    "toml": toml_texts(),
    "ini": ini_texts(),
    "properties": properties_texts(),
    "env": env_texts(),
}
_SOUP = {
    "json": ["{", "}", "[", "]", ",", ":", '"a"', "1", "-", "1e999", "null", "true", " ", "\\u"],
    "yaml": ["a", ":", " ", "\n", "- ", "[", "]", "{", "}", "&x", "*x", "!!", "|", ">", "'", '"'],
    "toml": ["a", "=", ".", "[", "]", "[[", "]]", "{", "}", '"', "'", "\n", "1", ",", "#"],
    "ini": ["[", "]", "a", "=", ":", ".", "\n", ";", "#", " ", '"', "1", "true"],
    "properties": ["a", "=", ":", ".", "\\", "\n", "\\u", "0", "#", "!", " ", "\\\n"],
    "env": ["A", "__", "=", "export ", "'", '"', "\n", "[", "]", "{", "}", "#", "1", " "],
}


def texts(format_name: str) -> st.SearchStrategy[str]:
    """Hostile structures, grammar soup and random text for one format."""
    soup = st.lists(st.one_of(st.sampled_from(_SOUP[format_name]), HOSTILE_CHARS), max_size=60).map(
        "".join
    )
    return st.one_of(_HOSTILE[format_name], _HOSTILE[format_name], soup, ANY_TEXT)


CASES = st.sampled_from(FORMATS).flatmap(lambda name: st.tuples(st.just(name), texts(name)))


def _judge_raised(entry: tuple[Any, ...], where: str) -> None:
    _status, name, message, mro = entry
    require(is_typed(mro), f"{where} raised {name}", "not a dynconf.errors error")
    require("\n" not in message, f"{where} message spans lines", message[:200])
    secret = leaked(message)
    require(secret is None, f"{where} message carries document text", "the planted value")


def check_document(case: tuple[str, str], *, render: bool = True) -> None:
    """Every promise for one ``(format, text)``; raises :class:`Violation`."""
    format_name, text = case
    outcome = worker().call(parse_and_render, format_name, text, deadline=EXAMPLE_SECONDS)
    require(
        outcome.status != "timeout",
        f"{format_name} parse/render past its time bound",
        f"> {EXAMPLE_SECONDS:.0f} s",
    )
    require(
        outcome.status == "ok",
        f"{format_name} parse/render killed the process",
        f"exit code {outcome.exitcode}",
    )
    require(
        outcome.peak_bytes <= PEAK_LIMIT,
        f"{format_name} parse/render past its memory bound",
        f"peak {outcome.peak_bytes // MiB} MiB",
    )
    result = outcome.value
    if result["parse"][0] == "raised":
        _judge_raised(result["parse"], f"{format_name} parse")
        return
    if not render:
        return
    for target, entry in result["render"].items():
        where = f"{format_name}→{target} render"
        if entry[0] == "raised":
            _judge_raised(entry, where)
        elif entry[0] == "reread-raised":
            raise Violation(f"{where} wrote text {target} does not read back", entry[1])
        elif entry[0] == "compare-raised":
            raise Violation(f"{where} re-read value cannot be compared", entry[1])
        else:
            require(entry[1], f"{where} does not round-trip", "re-read value differs")


@pytest.mark.parametrize("format_name", FORMATS)
@fuzz_settings(0.5)
@given(data=st.data())
def test_parse_answers_a_document_or_a_typed_error_within_bounds(
    format_name: str, data: st.DataObject
) -> None:
    check_document((format_name, data.draw(texts(format_name))), render=False)


@pytest.mark.parametrize("format_name", FORMATS)
@fuzz_settings(0.5)
@given(data=st.data())
def test_parsed_documents_render_into_every_format_or_refuse_by_type(
    format_name: str, data: st.DataObject
) -> None:
    check_document((format_name, data.draw(texts(format_name))))
