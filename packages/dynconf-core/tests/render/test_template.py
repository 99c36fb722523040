"""Templates: strict, sandboxed, config-file friendly, with the six extra filters."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynconf.errors import InvalidError, Origin
from dynconf.render import OutputSpec, TemplateSource, render_output
from dynconf.template import REQUIRED_MESSAGE, render_template

INLINE = Origin.inline()
SECRET = "s3cr3t-value-never-shown"


def render(source: str, context: dict[str, Any] | None = None) -> str:
    return render_template(source, context or {}, origin=INLINE)


def refusal(source: str, context: dict[str, Any] | None = None) -> str:
    with pytest.raises(InvalidError) as caught:
        render(source, context)
    message = str(caught.value)
    assert SECRET not in message
    return message


def test_context_is_the_document_with_top_level_keys_as_variables() -> None:
    doc = {"db": {"host": "h", "port": 5432}}
    assert render("{{ db.host }}:{{ db.port }}", doc) == "h:5432"


def test_undefined_name_is_an_error_naming_it_and_the_line() -> None:
    message = refusal("first\n{{ db.hots }}\n", {"db": {"host": SECRET}})
    assert "`db.hots`" in message
    assert "line 2" in message


def test_undefined_top_level_name_is_an_error() -> None:
    assert "`nope`" in refusal("{{ nope }}")


def test_undefined_key_computed_from_a_value_is_not_repeated() -> None:
    message = refusal("{{ db[k] }}", {"db": {}, "k": SECRET})
    assert "a key" in message


def test_booleans_render_lowercase() -> None:
    assert render("{{ a }} {{ b }}", {"a": True, "b": False}) == "true false"


def test_null_renders_empty_and_collections_as_json() -> None:
    doc = {"n": None, "l": [1, "x", True], "t": {"k": None}}
    assert render("[{{ n }}] {{ l }} {{ t }}", doc) == '[] [1, "x", true] {"k": null}'


def test_trailing_newline_is_kept() -> None:
    assert render("a={{ a }}\n", {"a": 1}) == "a=1\n"


def test_syntax_error_names_the_line() -> None:
    message = refusal("ok\n{% if %}\n")
    assert "syntax error" in message
    assert "line 2" in message


def test_b64encode() -> None:
    assert render("{{ v | b64encode }}", {"v": "héllo"}) == base64.b64encode(
        "héllo".encode()
    ).decode("ascii")


def test_b64decode_forgives_missing_padding() -> None:
    assert render("{{ v | b64decode }}", {"v": "aGk"}) == "hi"


def test_b64decode_refuses_invalid_input_without_showing_it() -> None:
    message = refusal("{{ v | b64decode }}", {"v": SECRET + "!!"})
    assert "b64decode: the value is not valid base64" in message


def test_b64decode_refuses_bytes_that_are_not_utf8() -> None:
    encoded = base64.b64encode(b"\xff\xfe").decode("ascii")
    assert "not UTF-8" in refusal("{{ v | b64decode }}", {"v": encoded})


def test_json_is_compact() -> None:
    assert render("{{ v | json }}", {"v": {"a": [1, 2], "b": "x"}}) == '{"a":[1,2],"b":"x"}'


def test_yaml_is_block_style_without_final_newline() -> None:
    out = render("{{ v | yaml }}", {"v": {"a": [1, 2], "b": "x"}})
    assert not out.endswith("\n")
    assert yaml.safe_load(out) == {"a": [1, 2], "b": "x"}


def test_yaml_of_a_scalar_has_no_document_end_marker() -> None:
    assert render("{{ v | yaml }}", {"v": "x"}) == "x"


def test_quote_gives_a_json_string() -> None:
    assert render("{{ v | quote }}", {"v": 'a "b"\n'}) == '"a \\"b\\"\\n"'
    assert render("{{ v | quote }}", {"v": True}) == '"true"'


@pytest.mark.parametrize("empty", ["", None, [], {}])
def test_required_refuses_empty_values_with_the_default_message(empty: object) -> None:
    assert REQUIRED_MESSAGE in refusal("{{ v | required }}", {"v": empty})


def test_required_refuses_undefined() -> None:
    assert REQUIRED_MESSAGE in refusal("{{ v | required }}")


def test_required_uses_the_given_message_and_passes_values_through() -> None:
    assert "give v" in refusal("{{ v | required('give v') }}", {"v": ""})
    assert render("{{ v | required }}", {"v": 0}) == "0"


def test_plugin_filters_come_from_the_registry(
    install_filters: Callable[[dict[str, Callable[..., Any]]], None],
) -> None:
    install_filters({"shout": lambda value: str(value).upper()})
    assert render("{{ v | shout }}", {"v": "x"}) == "X"


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ lipsum.__globals__['os'] }}",
        "{{ l.append(1) }}",
    ],
)
def test_sandbox_refuses_internals_and_mutation(source: str) -> None:
    message = refusal(source, {"l": []})
    assert "sandbox refuses" in message


@pytest.mark.parametrize("source", ["{{ open('/etc/passwd') }}", "{{ environ }}", "{{ os }}"])
def test_no_file_or_environment_access(source: str) -> None:
    assert "does not define" in refusal(source)


def test_include_cannot_read_another_template() -> None:
    assert "cannot read other templates" in refusal("{% include '/etc/passwd' %}")


def test_other_failures_report_the_type_only() -> None:
    message = refusal("{{ 1 // v }}", {"v": 0})
    assert "ZeroDivisionError" in message


# Each of these once printed the password: as a keyword name in a TypeError, as
# ``required``'s message, or in an exception's text. The error names the line and the kind.
VALUE_LEAKS = {
    "truncate with a keyword made of a value": "{{ 'x' | truncate(**{db.password: 1}) }}",
    "lipsum with a keyword made of a value": "{{ lipsum(**{db.password: 1}) }}",
    "int with a keyword made of a value": "{{ db.password | int(**{db.password: 1}) }}",
    "a macro with a keyword made of a value": (
        "{% macro m() %}{% endmacro %}{{ m(**{db.password: 1}) }}"
    ),
    "required with a value as its message": "{{ db.empty | required(db.password) }}",
    "required with a computed message": "{{ db.empty | required('no ' ~ db.password) }}",
    "a value in a wrong-type filter": "{{ db.password | round(db.password) }}",
    "a value added to a number": "{{ db.password + 1 }}",
    "a value as a printf format": "{{ db.password % 1 }}",
    "a value as a range": "{{ range(db.password) }}",
    "a value as a filter argument": "{{ db.password | format(db.password, x=1) }}",
    "a value as a test name": "{{ db.list | select(db.password) | list }}",
    "a value as a filter name": "{{ db.list | map(db.password) | list }}",
    "a value called": "{{ db.password() }}",
    "division by zero with a value": "{{ db.password | length // db.zero }}",
    "a value as a sort attribute": "{{ db.list | sort(attribute=db.password) }}",
    "a value compared": "{{ db.list | sort }}{{ db.password > 1 }}",
    "a value unpacked": "{% for a, b in db.password %}{% endfor %}",
    "a value in str.format": "{{ '{0[' ~ db.password ~ ']}'.format(db) }}",
    "a value as a sameas argument": "{{ db.password is sameas(1, db.password) }}",
}


@pytest.mark.parametrize("name", VALUE_LEAKS)
def test_template_errors_never_carry_a_document_value(name: str) -> None:
    document = {"db": {"password": SECRET, "empty": "", "list": [1, 2], "zero": 0}}
    message = refusal("line one\n" + VALUE_LEAKS[name], document)
    assert "template line 2" in message
    assert "\n" not in message


def test_required_shows_the_message_the_template_wrote() -> None:
    assert "give the password" in refusal("{{ v | required('give the password') }}", {"v": ""})


def test_template_file_is_reread_at_every_render(tmp_path: Path) -> None:
    template = tmp_path / "app.tmpl"
    spec = OutputSpec(path=tmp_path / "app.env", template=TemplateSource.file(template))
    template.write_text("A={{ a }}\n", encoding="utf-8")
    assert render_output({"a": 1}, spec) == b"A=1\n"
    template.write_text("B={{ a }}\n", encoding="utf-8")
    assert render_output({"a": 1}, spec) == b"B=1\n"


def test_template_file_errors_name_the_file(tmp_path: Path) -> None:
    template = tmp_path / "app.tmpl"
    template.write_text("{{ nope }}", encoding="utf-8")
    spec = OutputSpec(path=tmp_path / "app.env", template=TemplateSource.file(template))
    with pytest.raises(InvalidError) as caught:
        render_output({}, spec)
    assert str(template) in str(caught.value)


@pytest.mark.parametrize("source", ["{{ '\\ud800' }}", "{{ v }}"])
def test_a_lone_surrogate_in_the_output_is_a_refusal(source: str) -> None:
    assert "not valid Unicode" in refusal(source, {"v": "\ud800"})
