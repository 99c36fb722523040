"""The lease arithmetic: 65 % renew with spread, 90 % re-issue, no wait past the lease."""

from __future__ import annotations

import random

import pytest

from dynconf.stores import Lease
from dynconf_store_vault import LeaseAction, LeaseSchedule, certificate_ttl

pytestmark = pytest.mark.vault


def test_renewable_lease_is_renewed_between_60_and_70_percent() -> None:
    moments = {
        LeaseSchedule(Lease("l", 100.0, True), granted_at=0.0, rng=random.Random(seed)).act_at
        for seed in range(200)
    }
    assert all(60.0 <= m <= 70.0 for m in moments)
    assert max(moments) - min(moments) > 5.0  # spread, not one fixed moment
    assert LeaseSchedule(Lease("l", 100.0, True)).action is LeaseAction.RENEW


def test_non_renewable_lease_is_reissued_at_90_percent_and_never_renewed() -> None:
    schedule = LeaseSchedule(Lease("l", 100.0, False), granted_at=10.0)
    assert schedule.action is LeaseAction.REISSUE
    assert schedule.act_at == pytest.approx(100.0)


def test_a_lease_without_ttl_schedules_nothing() -> None:
    schedule = LeaseSchedule(Lease("", 0.0, False), granted_at=0.0)
    assert schedule.action is LeaseAction.NONE
    assert schedule.expires_at is None
    assert schedule.bounded(300.0) == 300.0


def test_backoff_never_sleeps_past_the_lease_end() -> None:
    schedule = LeaseSchedule(Lease("l", 30.0, True), granted_at=0.0)
    assert schedule.bounded(300.0, now=10.0) == pytest.approx(20.0)
    assert schedule.bounded(5.0, now=10.0) == 5.0


def test_backoff_after_the_lease_ran_out_is_the_ordinary_one() -> None:
    schedule = LeaseSchedule(Lease("l", 30.0, True), granted_at=0.0)
    assert schedule.bounded(8.0, now=31.0) == 8.0


def test_certificate_expiry_wins_when_it_comes_first() -> None:
    assert certificate_ttl(3600.0, expiration_epoch=1_000_600.0, now_epoch=1_000_000.0) == 600.0


def test_lease_wins_when_it_comes_first() -> None:
    assert certificate_ttl(300.0, expiration_epoch=1_000_600.0, now_epoch=1_000_000.0) == 300.0


def test_certificate_that_looks_expired_is_clock_skew_and_the_lease_wins() -> None:
    assert certificate_ttl(3600.0, expiration_epoch=999_990.0, now_epoch=1_000_000.0) == 3600.0


def test_certificate_without_lease_lives_until_not_after() -> None:
    assert certificate_ttl(0.0, expiration_epoch=1_000_600.0, now_epoch=1_000_000.0) == 600.0
