"""The call budget's token bucket, its bounds and its labels, over an injected clock."""

from __future__ import annotations

import pytest

from dynconf.budget import (
    Budget,
    BudgetExceeded,
    CallLedger,
    StoreCalls,
    TokenBucket,
    endpoint_label,
    parse_budget,
    parse_budgets,
)
from dynconf.errors import AuthError, RemoteError, ThrottledError
from dynconf.stores import ABSENT, Fetched


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_bucket_without_budget_never_waits() -> None:
    bucket = TokenBucket(None, clock=Clock())
    assert [bucket.reserve() for _ in range(1000)] == [0.0] * 1000


def test_bucket_lets_the_burst_through_then_spaces_calls_by_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(Budget(rate=2.0, burst=3), clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.5)
    assert bucket.reserve() == pytest.approx(1.0)  # queued behind the one booked before it


def test_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(Budget(rate=1.0, burst=2), clock=clock)
    bucket.reserve(), bucket.reserve()
    clock.now += 60
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() == pytest.approx(1.0)


def test_bucket_holds_back_a_call_past_the_bound_without_booking_it() -> None:
    clock = Clock()
    bucket = TokenBucket(Budget(rate=1.0, burst=1), clock=clock)
    assert bucket.reserve(max_wait=0.5) == 0.0
    assert bucket.reserve(max_wait=0.5) is None
    clock.now += 1.0
    assert bucket.reserve(max_wait=0.5) == 0.0  # the refused call took no token


def test_retry_after_holds_calls_even_without_a_budget() -> None:
    clock = Clock()
    calls = StoreCalls("consul", "http://127.0.0.1:8500", clock=clock)
    calls.record(ThrottledError("slow down", retry_after=3.0))
    assert calls.admit() == pytest.approx(3.0)
    clock.now += 3.0
    assert calls.admit() == 0.0
    assert calls.counts()["throttled"] == 1
    assert calls.counts()["budget"] == 1


def test_retry_after_is_capped() -> None:
    clock = Clock()
    calls = StoreCalls("vault", "", clock=clock, max_wait=1000)
    calls.record(ThrottledError("slow down", retry_after=86400))
    assert calls.admit() == pytest.approx(60.0)


def test_call_past_the_bound_raises_a_retryable_error_counted_as_budget() -> None:
    calls = StoreCalls("redis", "redis://h:6379", Budget(1.0, 1), clock=Clock(), max_wait=0.1)
    calls.admit()
    with pytest.raises(BudgetExceeded) as caught:
        calls.admit()
    assert isinstance(caught.value, RemoteError)
    assert "redis at redis://h:6379" in str(caught.value)
    calls.record(caught.value)  # nothing was sent: not counted twice
    assert calls.counts()["budget"] == 1
    assert sum(calls.counts().values()) == 1


def test_outcomes_come_from_answers_and_error_kinds() -> None:
    calls = StoreCalls("consul", "", clock=Clock())
    for result in (
        Fetched("{}", "json"),
        ABSENT,
        AuthError("refused"),
        ThrottledError("slow"),
        RemoteError("down"),
        ValueError("a client's own exception"),
    ):
        calls.record(result)
    assert calls.counts() == {
        "ok": 1, "not_found": 1, "unauthorized": 1, "throttled": 1, "error": 2, "budget": 0
    }  # fmt: skip


def test_ledger_shares_one_account_per_store_and_endpoint_origin() -> None:
    calls = CallLedger(clock=Clock())
    first = calls.account("consul", "http://127.0.0.1:8500")
    assert calls.account("consul", "HTTP://127.0.0.1:8500/v1/kv?dc=x") is first
    assert calls.account("consul", "http://127.0.0.1:8501") is not first
    assert calls.account("etcd", "http://127.0.0.1:8500") is not first


def test_ledger_budgets_apply_to_accounts_made_before_and_after() -> None:
    clock = Clock()
    calls = CallLedger(clock=clock)
    early = calls.account("consul", "http://a:1")
    calls.configure({"consul": Budget(1.0, 1)})
    late = calls.account("consul", "http://b:1")
    for account in (early, late):
        assert account.bucket.reserve() == 0.0
        assert account.bucket.reserve() == pytest.approx(1.0)
    assert calls.account("vault", "http://a:1").bucket.budget is None


@pytest.mark.parametrize(
    ("endpoint", "label"),
    [
        ("http://user:secret@Consul.example:8500/v1/kv/app?token=t", "http://consul.example:8500"),
        ("redis://:hunter2@127.0.0.1:6379/0", "redis://127.0.0.1:6379"),
        ("nats://a:4222,nats://b:4222", "nats://a:4222"),
        ("git@github.com:org/repo.git", "ssh://github.com"),
        ("https://[::1]:8200", "https://[::1]:8200"),
        ("127.0.0.1:2379", "127.0.0.1:2379"),
        ("", ""),
    ],
)
def test_endpoint_label_keeps_only_scheme_host_and_port(endpoint: str, label: str) -> None:
    assert endpoint_label(endpoint) == label


def test_budget_grammar() -> None:
    assert parse_budget("10") == Budget(10.0, 10)
    assert parse_budget("0.5/2") == Budget(0.5, 2)
    assert parse_budget("0.5") == Budget(0.5, 1)
    assert parse_budget("off") is None and parse_budget("") is None
    assert parse_budgets("consul=10/20, vault=off", "X") == {"consul": Budget(10.0, 20)}


@pytest.mark.parametrize("text", ["fast", "0", "-1", "10/0", "10/x", "inf"])
def test_bad_budget_is_one_sentence_naming_the_setting_and_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--store-budget .*RATE/BURST"):
        parse_budget(text, "--store-budget")
