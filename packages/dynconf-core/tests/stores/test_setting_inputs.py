"""A store's settings and setting inputs are judged by the base, once, for every store."""

from __future__ import annotations

from dynconf.stores import (
    StoreInput,
    StoreSpec,
    StoreTypeBase,
    flag_spelling,
    keyword_spelling,
    setting_inputs,
    toml_spelling,
)


class _Tenth(StoreTypeBase):
    name = "tenth"
    settings = ("format",)
    inputs = (
        StoreInput("token_header", summary="where the token goes"),
        StoreInput("strict", "switch"),
        StoreInput("mirror", "url"),
        StoreInput("keys", "list"),
    )


def _spec(**extra: str) -> StoreSpec:
    return StoreSpec(source="tenth", endpoint="https://x", key="a.json", extra=extra)


def test_a_nine_store_input_is_a_setting_too() -> None:
    """git's ``ref`` is no StoreSpec field: routed into ``extra`` and read back by name."""
    spec = StoreSpec.from_inputs(source="git", endpoint="https://x", key="a.yaml", ref="tag:v1")
    assert spec.extra == {"ref": "tag:v1"} and spec.setting("ref") == "tag:v1"
    assert StoreSpec.from_inputs(source="git", endpoint="e", key="k", ref=None).extra == {}


def test_only_inputs_no_spec_field_holds_are_setting_inputs() -> None:
    assert [declared.name for declared in setting_inputs(_Tenth())] == [
        "token_header",
        "strict",
        "mirror",
    ]


def test_a_declared_setting_input_is_taken_and_named_by_its_own_name() -> None:
    store = _Tenth()
    assert store.refusals(_spec(token_header="X-Token", strict="true", format="json")) == []
    (refusal,) = store.refusals(_spec(strict="maybe"))
    assert refusal.field == "strict"
    assert refusal.render(flag_spelling) == "--strict must be true or false; leave it out to " \
        "keep the default"  # fmt: skip
    assert refusal.render(keyword_spelling).startswith("strict= must be")
    assert refusal.render(toml_spelling).startswith("strict must be")


def test_a_setting_input_is_one_line_of_text() -> None:
    (blank,) = _Tenth().refusals(_spec(token_header="a\nb"))
    assert "control character" in blank.render(flag_spelling)
    assert "a\nb" not in blank.render(flag_spelling)


def test_a_setting_nobody_declares_is_refused_listing_the_stores_own() -> None:
    (refusal,) = _Tenth().refusals(_spec(colour="red"))
    assert refusal.field == "extra.colour"
    assert refusal.render(flag_spelling) == (
        "colour is not a setting tenth reads; use one of: format, token_header, strict, mirror"
    )


def test_a_store_without_settings_says_it_takes_none() -> None:
    class Bare(StoreTypeBase):
        name = "bare"

    (refusal,) = Bare().refusals(StoreSpec(source="bare", endpoint="x", key="k", extra={"a": "b"}))
    assert refusal.render(flag_spelling) == "a is not a setting bare reads; bare takes no settings"
