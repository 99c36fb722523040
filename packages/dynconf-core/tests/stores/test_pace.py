"""The shared watch pacing: backoff, jitter and the floor every store's loop inherits."""

from __future__ import annotations

import time

import pytest

from dynconf.store_http import (
    HttpPolicy,
    http_setting_refusals,
    note_ignored_proxy,
    origin_of,
    redirect_refusal,
)
from dynconf.stores import WATCH_FLOOR, Pace, flag_spelling


def test_no_wait_is_shorter_than_the_floor_even_for_a_zero_interval() -> None:
    pace = Pace(0.0)
    assert min(pace.next_wait() for _ in range(200)) >= WATCH_FLOOR
    assert pace.steady() == WATCH_FLOOR


def test_back_to_back_requests_are_spaced_by_the_floor() -> None:
    pace = Pace(0.0)
    assert pace.until_next() == 0.0
    started = time.monotonic()
    for _ in range(3):
        time.sleep(pace.until_next())
    assert time.monotonic() - started >= 3 * WATCH_FLOOR * 0.95


def test_a_request_after_news_is_not_held_and_the_next_is_spaced_from_it() -> None:
    pace = Pace(0.0)
    assert pace.until_next() == 0.0
    assert pace.until_next(fresh=True) == 0.0  # the previous answer brought a change
    assert pace.until_next() > WATCH_FLOOR * 0.9  # nothing new since: held a floor


def test_backoff_still_doubles_to_the_ceiling() -> None:
    pace = Pace(1.0, ceiling=8.0)
    for _ in range(10):
        pace.failed()
    assert pace.base() == 8.0
    pace.succeeded()
    assert pace.base() == 1.0


@pytest.mark.parametrize(
    ("settings", "policy"),
    [
        ({}, HttpPolicy()),
        ({"follow_redirects": "true"}, HttpPolicy(follow_redirects=True)),
        ({"use_proxy": "Yes", "follow_redirects": "no"}, HttpPolicy(use_proxy=True)),
    ],
)
def test_http_settings_read_as_a_policy(settings: dict[str, str], policy: HttpPolicy) -> None:
    assert HttpPolicy.from_settings(settings) == policy
    assert http_setting_refusals("consul", settings) == []


def test_an_unreadable_http_setting_is_refused_naming_it() -> None:
    refusals = http_setting_refusals("vault", {"use_proxy": "sometimes"})
    assert [r.field for r in refusals] == ["extra.use_proxy"]
    assert [r.render(flag_spelling) for r in refusals] == [
        "use_proxy for vault must be true or false; leave it out to keep the default (off)"
    ]


def test_redirect_refusal_names_the_origin_and_the_setting() -> None:
    same = redirect_refusal(307, "http://a:80/x", own="http://a/", followable=True)
    assert "307 redirecting to http://a:80" in same and "follow_redirects=true" in same
    other = redirect_refusal(307, "https://b/x?token=s3cret", own="http://a/", followable=True)
    assert "another origin" in other and "s3cret" not in other
    assert origin_of("http://[::1]:8/p") == "http://[::1]:8"


def test_ignored_proxy_variables_are_named_once_without_their_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {"https_proxy": "http://user:s3cret@proxy:3128", "NO_PROXY": "x"}
    with caplog.at_level("WARNING", logger="dynconf.store"):
        note_ignored_proxy("consul http://c:8500 kv/a.json", environ)
        note_ignored_proxy("consul http://c:8500 kv/a.json", environ)
    lines = [r for r in caplog.records if r.getMessage() == "store_proxy_ignored"]
    assert len(lines) == 1
    assert lines[0].variables == "HTTPS_PROXY"  # type: ignore[attr-defined]
    assert "use_proxy=true" in lines[0].reason  # type: ignore[attr-defined]
    assert "s3cret" not in caplog.text
