"""INI, properties and .env: reading rules, emitter layout, refusals by path."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from dynconf.document import Document, same_value
from dynconf.errors import Origin, ParseError, TypeMismatchError
from dynconf.formats import ENV, INI, PROPERTIES, dotenv, ini, properties
from dynconf.formats._flat import widen
from dynconf.plugins import FormatType

ORIGIN = Origin.file("/config/app")
SECRET = "hunter2-s3cr3t"
FLAT = [INI, PROPERTIES, ENV]
ARRAY_SENTENCE = (
    "`{path}` is an array, and neither flat format has one; render to json, toml or yaml instead"
)


def _dump(fmt: FormatType, document: Document) -> str:
    assert fmt.dump is not None
    return fmt.dump(document)


# --- shared -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('"1.10"', "1.10"),
        ('"a"b"', 'a"b'),
        ('"', '"'),
        ("true", True),
        ("True", "True"),
        ("42", 42),
        ("+42", 42),
        ("-0", 0),
        ("9223372036854775808", 9223372036854775808.0),
        ("1e5", 100000.0),
        ("1.", 1.0),
        (".5", 0.5),
        ("inf", math.inf),
        ("-Infinity", -math.inf),
        ("1_000", "1_000"),
        ("0x1F", "0x1F"),
        (" 5", " 5"),
        ("", ""),
    ],
)
def test_widening_follows_the_flat_rules(raw: str, expected: object) -> None:
    assert same_value(widen(raw), expected)


def test_widening_reads_nan() -> None:
    assert math.isnan(widen("NaN"))


@pytest.mark.parametrize("fmt", FLAT, ids=lambda f: f.name)
@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"a": [1, 2]}, "a"),
        ({"a": {"b": {"c": []}}}, "a.b.c"),
        ({"x": 1, "db": {"hosts": ["h1"]}}, "db.hosts"),
    ],
)
def test_an_array_anywhere_is_refused_naming_its_path(
    fmt: FormatType, document: Document, path: str
) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(fmt, document)
    assert caught.value.path == path
    assert caught.value.message == ARRAY_SENTENCE.format(path=path)


@pytest.mark.parametrize("fmt", FLAT, ids=lambda f: f.name)
def test_null_is_refused_by_path(fmt: FormatType) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(fmt, {"a": {"b": None}})
    assert caught.value.path == "a.b"


@pytest.mark.parametrize("fmt", FLAT, ids=lambda f: f.name)
def test_refusals_never_contain_the_value(fmt: FormatType) -> None:
    documents: list[Document] = [{"a": [SECRET]}, {"a": {"b": None, "c": SECRET}}]
    if fmt is not PROPERTIES:  # properties writes any integer's digits, as Java reads them
        documents.append({"a": 2**70})
    for document in documents:
        with pytest.raises(TypeMismatchError) as caught:
            _dump(fmt, document)
        assert SECRET not in str(caught.value)
        assert str(2**70) not in str(caught.value)


@pytest.mark.parametrize("fmt", FLAT, ids=lambda f: f.name)
@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_blank_text_is_an_empty_table(fmt: FormatType, text: str) -> None:
    assert fmt.parse(text, ORIGIN) == {}


@pytest.mark.parametrize(
    ("fmt", "text", "line"),
    [
        (INI, f"a = {SECRET}\na.b = {SECRET}\n", 2),
        (INI, f"[a]\nb = {SECRET}\n[a.b]\n", 3),
        (INI, f"; c\n{SECRET}\n", 2),
        (INI, f" = {SECRET}\n", 1),
        (INI, f"[a\nb = {SECRET}\n", 1),
        (INI, "[a..b]\n", 1),
        (PROPERTIES, f"a.b = {SECRET}\na = {SECRET}\n", 2),
        (PROPERTIES, f"# c\n{SECRET}\n", 2),
        (PROPERTIES, f"a = \\u12{SECRET}\n", 1),
        (PROPERTIES, f"a..b = {SECRET}\n", 1),
        (ENV, f"A={SECRET}\nA__B={SECRET}\n", 2),
        (ENV, f"{SECRET}\n", 1),
        (ENV, f"={SECRET}\n", 1),
        (ENV, f"A____B={SECRET}\n", 1),
    ],
)
def test_parse_errors_give_the_line_and_never_the_text(
    fmt: FormatType, text: str, line: int
) -> None:
    with pytest.raises(ParseError) as caught:
        fmt.parse(text, ORIGIN)
    message = str(caught.value)
    assert f" parse error at line {line}: " in message
    assert SECRET not in message
    assert caught.value.origin == ORIGIN


# --- INI ----------------------------------------------------------------------------


def test_ini_reads_sections_dotted_headers_and_dotted_keys() -> None:
    text = (
        "; comment\n"
        "# also a comment\n"
        "name = svc\n"
        "[db]\n"
        "host = h # not a comment\n"
        "pool.max = 8\n"
        "[db.replica]\n"
        "port=5432\n"
        "[ cache ]\n"
        'ttl = "30"\n'
    )
    assert same_value(
        ini.parse(text, ORIGIN),
        {
            "name": "svc",
            "db": {"host": "h # not a comment", "pool": {"max": 8}, "replica": {"port": 5432}},
            "cache": {"ttl": "30"},
        },
    )


def test_ini_repeated_key_takes_the_later_value() -> None:
    assert ini.parse("a = 1\na = 2\n", ORIGIN) == {"a": 2}


def test_ini_dump_layout_scalars_first_then_one_section_per_table() -> None:
    document = {
        "db": {"host": "h", "pool": {"max": 8, "idle": {}}},
        "name": "svc",
        "ver": "1.10",
        "flag": "true",
        "pad": " x ",
        "quoted": '"q"',
        "empty": "",
        "tbl": {},
    }
    assert _dump(INI, document) == (
        "name = svc\n"
        'ver = "1.10"\n'
        'flag = "true"\n'
        'pad = " x "\n'
        'quoted = ""q""\n'
        "empty =\n"
        "\n"
        "[db]\n"
        "host = h\n"
        "pool.max = 8\n"
        "\n"
        "[db.pool.idle]\n"
        "\n"
        "[tbl]\n"
    )
    assert same_value(ini.parse(_dump(INI, document), ORIGIN), document)


def test_ini_refuses_a_string_with_a_line_break() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(INI, {"s": {"motd": "hello\nworld"}})
    assert caught.value.path == "s.motd"


@pytest.mark.parametrize("key", ["a.b", "a=b", "#a", ";a", "[a", " a", "a ", ""])
def test_ini_refuses_keys_it_cannot_spell(key: str) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(INI, {"s": {key: 1}})
    assert caught.value.path == f"s.{key}"


def test_ini_refuses_integers_past_64_bits() -> None:
    with pytest.raises(TypeMismatchError):
        _dump(INI, {"big": -(2**63) - 1})


# --- properties ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 9999999999999999999, 10**40])
def test_properties_refuses_integers_past_64_bits_by_path(value: int) -> None:
    with pytest.raises(TypeMismatchError, match="outside the 64-bit range") as caught:
        _dump(PROPERTIES, {"a": {"big": value}})
    assert caught.value.path == "a.big"


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63)])
def test_properties_writes_the_64_bit_bounds_and_reads_them_back_as_integers(value: int) -> None:
    assert properties.parse(_dump(PROPERTIES, {"n": value}), ORIGIN) == {"n": value}


def test_properties_reads_continuations_comments_and_escapes() -> None:
    text = (
        "# comment\n"
        "  ! another\n"
        "db.pool.max = 8\n"
        "db.host: h\n"
        "long = one \\\n"
        "       two\n"
        "esc\\=key = a\\tb\\u00e9\\:\\#\n"
        "spaced\\ key =   value with trailing  \n"
        "lone = end\\"
    )
    assert same_value(
        properties.parse(text, ORIGIN),
        {
            "db": {"pool": {"max": 8}, "host": "h"},
            "long": "one two",
            "esc=key": "a\tbé:#",
            "spaced key": "value with trailing  ",
            "lone": "end\\",
        },
    )


def test_properties_widening_happens_after_unescaping() -> None:
    assert same_value(properties.parse('a = \\"1\\"\nb = \\u0031\n', ORIGIN), {"a": "1", "b": 1})


def test_properties_dump_escapes_separators_and_line_breaks() -> None:
    document = {"a": {"b": "x=y:z\\w\nv"}, "k:ey": " lead", "#k": "!v # w"}
    text = _dump(PROPERTIES, document)
    assert text == "a.b = x\\=y\\:z\\\\w\\nv\nk\\:ey = \\ lead\n\\#k = \\!v \\# w\n"
    assert same_value(properties.parse(text, ORIGIN), document)


def test_properties_dump_writes_number_and_boolean_like_strings_unquoted() -> None:
    document = {"port": "5432", "on": "true", "ver": "1.10", "q": '"x"', "n": 8080, "b": False}
    text = _dump(PROPERTIES, document)
    assert text == 'port = 5432\non = true\nver = 1.10\nq = "x"\nn = 8080\nb = false\n'
    assert properties.load_strings(text, ORIGIN) == {
        "port": "5432",
        "on": "true",
        "ver": "1.10",
        "q": '"x"',
        "n": "8080",
        "b": "false",
    }


def test_properties_reader_still_widens_what_java_keeps_as_text() -> None:
    text = _dump(PROPERTIES, {"port": "5432", "on": "true", "q": '"x"'})
    assert same_value(properties.parse(text, ORIGIN), {"port": 5432, "on": True, "q": "x"})


def test_properties_dump_is_ascii_with_unicode_escapes() -> None:
    text = _dump(PROPERTIES, {"k\u00e9y": "\u00e9\u65e5\U0001f600\x0c\x00\x7f"})
    assert text == "k\\u00E9y = \\u00E9\\u65E5\\uD83D\\uDE00\\u000C\\u0000\\u007F\n"
    assert properties.load_strings(text, ORIGIN) == {
        "k\u00e9y": "\u00e9\u65e5\U0001f600\x0c\x00\x7f"
    }


def test_properties_reads_a_surrogate_pair_escape_as_one_character() -> None:
    assert properties.parse("a = \\ud83d\\ude00\n", ORIGIN) == {"a": "\U0001f600"}


def test_properties_refuses_an_empty_table_by_path() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(PROPERTIES, {"a": {"b": {}}})
    assert caught.value.path == "a.b"


def test_properties_refuses_a_key_holding_a_dot() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(PROPERTIES, {"a": {"b.c": 1}})
    assert caught.value.path == "a.b.c"


# --- .env ---------------------------------------------------------------------------


def test_env_reads_dotenv_lines() -> None:
    text = (
        "# comment\n"
        "export APP_NAME=svc\n"
        "DB__HOST = 'db.local'\n"
        'DB__PORT="5432"\n'
        "URL=postgres://u@h/db?x=1\n"
        "HOME_REF=${HOME}\n"
        "NOTE=a # b\n"
        "LIST=[a, b]\n"
        "Mixed__Case=true\n"
    )
    assert same_value(
        dotenv.parse(text, ORIGIN),
        {
            "app_name": "svc",
            "db": {"host": "db.local", "port": 5432},
            "url": "postgres://u@h/db?x=1",
            "home_ref": "${HOME}",
            "note": "a # b",
            "list": ["a", "b"],
            "mixed": {"case": True},
        },
    )


def test_env_dump_upper_cases_paths_and_writes_each_string_as_the_shell_reads_it() -> None:
    document = {
        "db": {"host": "h", "port": 5432, "ratio": 1e16},
        "ver": "1.10",
        "flag": "true",
        "pad": " x ",
        "motd": "it's $(id) `id`; ok",
        "extra": {},
        "empty": "",
    }
    text = _dump(ENV, document)
    assert text == (
        "DB__HOST=h\n"
        "DB__PORT=5432\n"
        "DB__RATIO=1.0e+16\n"
        "VER=1.10\n"
        "FLAG=true\n"
        "PAD=' x '\n"
        "MOTD='it'\\''s $(id) `id`; ok'\n"
        "EXTRA={}\n"
        "EMPTY=\n"
    )
    # Our reader widens what the shell sees, by the text grammar (as .properties does).
    back = dotenv.parse(text, ORIGIN)
    assert back["motd"] == "it's $(id) `id`; ok" and back["pad"] == "x"  # the grammar trims
    assert (back["ver"], back["flag"]) == (1.1, True)


def test_env_file_sourced_by_sh_gives_each_value_its_exact_text_and_runs_nothing(
    tmp_path: Path,
) -> None:
    """env-inject sources the file with ``/bin/sh`` (``set -a; . file``): nothing may run."""
    marker = tmp_path / "ran"
    values = {
        "port": "9000",
        "spaced": "x y",
        "quote": "it's",
        "dq": 'say "hi"',
        "subst": f"$(touch {marker})",
        "backtick": f"`touch {marker}`",
        "semi": f"a; touch {marker}",
        "dollar": "$HOME ${HOME}",
        "glob": "*",
        "unicode": "é日本",
        "tab": "a\tb",
        "empty": "",
        "lead": "  both  ",
    }
    env_file = tmp_path / "app.env"
    env_file.write_text(_dump(ENV, {"app": values}))
    script = 'set -a; . "$1"; set +a; ' + "; ".join(
        f'printf "%s\\0" "$APP__{name.upper()}"' for name in values
    )
    out = subprocess.run(
        ["/bin/sh", "-c", script, "sh", str(env_file)], capture_output=True, check=True
    ).stdout
    assert out.decode().split("\0")[:-1] == list(values.values())
    assert not marker.exists()


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "bell\x07"])
def test_env_refuses_control_characters_a_line_cannot_carry(value: str) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(ENV, {"s": value})
    assert caught.value.path == "s"


@pytest.mark.parametrize("key", ["A", "a__b", "_a", "a_", "a-b", "a.b", "é", ""])
def test_env_refuses_keys_that_would_not_read_back(key: str) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(ENV, {"s": {key: 1}})
    assert caught.value.path == f"s.{key}"


@pytest.mark.parametrize("value", [math.inf, math.nan, 2**64, -(2**63) - 1])
def test_env_refuses_numbers_the_grammar_cannot_read_back(value: float) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        _dump(ENV, {"n": value})
    assert caught.value.path == "n"
