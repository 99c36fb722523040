"""Rows for a store's declared setting inputs: spelled from the input, never shadowing the book."""

from __future__ import annotations

import logging

import pytest

from dynconf.stores import StoreInput, StoreTypeBase
from dynconf_k8s.contract.registry import BOOK_KEYS, KEYS, store_input_rows


class _Tenth(StoreTypeBase):
    name = "tenth"
    inputs = (
        StoreInput("token_header", summary="where the token goes"),
        StoreInput("strict", "switch"),
        StoreInput("watch_seconds"),
        StoreInput("api_key", secret=True),
        StoreInput("mirrors", "list"),
        StoreInput("ref"),
    )


def test_the_nine_stores_declare_no_input_the_book_lacks() -> None:
    assert KEYS == BOOK_KEYS


def test_a_setting_input_gets_a_row_spelled_from_its_name() -> None:
    rows = {row.name: row for row in store_input_rows([_Tenth()], BOOK_KEYS)}
    header = rows["token-header"]
    assert (header.flags, header.csi, header.setting) == (
        ("--token-header",),
        "token-header",
        "token_header",
    )
    assert header.per_render and header.store_knob and header.store_shaped
    assert header.args("X-Token") == ["--token-header", "X-Token"]
    assert rows["strict"].bare and rows["strict"].args("true") == ["--strict"]


def test_inputs_a_row_cannot_carry_are_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="dynconf.plugins"):
        rows = {row.name for row in store_input_rows([_Tenth()], BOOK_KEYS)}
    assert rows == {"token-header", "strict"}
    reasons = {record.__dict__["input"]: record.__dict__["reason"] for record in caplog.records}
    assert reasons == {
        "watch_seconds": "it shadows a contract key or flag",
        "api_key": "a setting input cannot be secret",
        "mirrors": "its kind list is not one of text, url, path, switch",
    }
