"""Durations and byte sizes (engine contract §1.5) and the seconds-or-duration knob."""

from __future__ import annotations

import pytest

from dynconf.errors import TypeMismatchError
from dynconf.units import (
    format_duration,
    parse_bytes,
    parse_duration,
    parse_seconds_or_duration,
)

SECRET = "hunter2-s3cr3t"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (30, 30.0),
        (0, 0.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("30m1h", 5400.0),
        ("1m 500ms", 60.5),
        ("1d", 86400.0),
        ("250ms", 0.25),
        (" 2h ", 7200.0),
    ],
)
def test_durations_chain_components_in_any_order(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    "value", ["30", "", "-", "-1s", "1H", "1.5h", "1hh", "h", 1.5, True, None, -1, 2**64]
)
def test_bad_durations_are_refused_listing_the_units(value: object) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        parse_duration(value, path="timeout")
    message = str(caught.value)
    assert "ms, s, m, h or d" in message
    assert caught.value.path == "timeout"


def test_duration_errors_do_not_echo_a_secret() -> None:
    with pytest.raises(TypeMismatchError) as caught:
        parse_duration(SECRET)
    assert SECRET not in str(caught.value)


def test_duration_serialises_as_total_milliseconds() -> None:
    assert format_duration(parse_duration("1m 500ms")) == "60500ms"


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (512, 512),
        ("512", 512),
        ("1B", 1),
        ("1k", 1024),
        ("1KiB", 1024),
        ("2 MiB", 2 * 2**20),
        ("1g", 2**30),
        ("1TiB", 2**40),
        ("1KB", 1000),
        ("10 gb", 10**10),
        ("1TB", 10**12),
    ],
)
def test_byte_sizes_are_binary_unless_spelled_decimal(value: object, count: int) -> None:
    assert parse_bytes(value) == count


@pytest.mark.parametrize(
    "value", ["", "1.5G", "-1", "1 PB", "G", "1 KiBs", -1, True, 2**64, SECRET]
)
def test_bad_byte_sizes_list_the_units_and_never_echo_the_input(value: object) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        parse_bytes(value)
    message = str(caught.value)
    assert "KiB" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(300, 300.0), ("300", 300.0), ("90s", 90.0), ("15m", 900.0), ("6h", 21600.0), ("1d", 86400.0)],
)
def test_seconds_or_duration_accepts_both_spellings(value: object, seconds: float) -> None:
    assert parse_seconds_or_duration(value) == seconds


@pytest.mark.parametrize("value", ["", "-5", "5x", "1.5", -5, SECRET])
def test_seconds_or_duration_refusal_names_both_spellings(value: object) -> None:
    with pytest.raises(TypeMismatchError) as caught:
        parse_seconds_or_duration(value, path="max-staleness")
    message = str(caught.value)
    assert "whole seconds" in message
    assert "90s" in message
    assert SECRET not in message
