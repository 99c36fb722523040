"""A store refusal is data: the field is named once and each front end spells it its own way."""

from __future__ import annotations

import pytest

from dynconf.errors import Refusal
from dynconf.plugins import default_registry
from dynconf.stores import (
    COMMON_INPUTS,
    StoreSpec,
    flag_spelling,
    keyword_spelling,
    toml_spelling,
)


def test_a_refusal_renders_its_field_in_each_vocabulary() -> None:
    refusal = Refusal("auth_role", "vault auth kubernetes needs {field}", "set the role")

    assert refusal.render(flag_spelling) == "vault auth kubernetes needs --auth-role; set the role"
    assert refusal.render(keyword_spelling) == (
        "vault auth kubernetes needs auth_role=; set the role"
    )
    assert refusal.render(toml_spelling) == "vault auth kubernetes needs auth_role; set the role"


def test_a_field_without_a_mark_leads_the_sentence() -> None:
    assert Refusal("ref", "is git's", "remove it").render(flag_spelling) == (
        "--ref is git's; remove it"
    )


def test_a_refusal_without_a_field_is_its_sentence() -> None:
    assert Refusal(None, "the key names no document").render(flag_spelling) == (
        "the key names no document"
    )


def test_secret_inputs_are_spelled_by_where_they_come_from_never_a_value() -> None:
    assert flag_spelling("token") == "a token (DYNAMIC_CONFIG_AGENT_TOKEN)"
    assert keyword_spelling("tls.ca_file") == "tls=TlsSettings(ca_file=)"


@pytest.mark.parametrize(
    ("store", "spec_field", "owners"),
    [
        ("vault", "ref", "git"),
        ("consul", "api_url", "firestore and s3"),
        ("git", "namespace", "vault"),
        ("redis", "dynamic", "vault"),
    ],
)
def test_an_undeclared_input_is_refused_naming_the_stores_that_declare_it(
    store: str, spec_field: str, owners: str
) -> None:
    spec = StoreSpec(source=store, endpoint="http://127.0.0.1:1", key="k.json", token="t")
    spec = StoreSpec.from_inputs(
        **{**spec.__dict__, spec_field: True if spec_field == "dynamic" else "x"}
    )

    refusals = default_registry().store(store).refusals(spec)

    mine = [r for r in refusals if r.field == spec_field]
    assert mine == [Refusal(spec_field, f"is {owners}'s", f"remove it for a {store} source")]


def test_the_spec_holds_only_the_common_part_and_two_typed_inputs() -> None:
    """A store's own text inputs (``ref``, ``api_url``, ``namespace``, ``ssh_key``) are
    settings in ``extra``; only the typed ``keys`` (a list) and ``dynamic`` (a switch the agent
    acts on) are fields."""
    spec_fields = set(StoreSpec.__dataclass_fields__)
    assert spec_fields - COMMON_INPUTS == {"keys", "dynamic"}
    for store in default_registry().stores.values():
        for declared in store.inputs:
            assert declared.name not in COMMON_INPUTS, (store.name, declared.name)
            assert declared.is_setting == (declared.name not in spec_fields)


def test_validate_is_the_refusals_in_the_agents_flag_vocabulary() -> None:
    store = default_registry().store("vault")
    spec = StoreSpec.from_inputs(
        source="vault", endpoint="https://vault:8200", key="secret/app", ref="main"
    )

    assert store.validate(spec) == [r.render(flag_spelling) for r in store.refusals(spec)]
