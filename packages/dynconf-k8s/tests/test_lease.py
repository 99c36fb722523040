"""LeaderLease against the real test API server: who leads, who follows, when it changes hands.

Each test owns a Lease of its own name in ``default``. Expiry is judged on a clock the test
moves, so a term runs out without waiting it out; every write is a real one.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

from dynconf_k8s.lease import LeaderLease, Round

NAMESPACE = "default"
TERM = 15.0


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lease_name(kube_client: Any) -> Iterator[str]:
    name = f"lease-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        client.CoordinationV1Api(kube_client).delete_namespaced_lease(name, NAMESPACE)
    except ApiException as error:
        if error.status != 404:
            raise


def _contender(name: str, identity: str, clock: Clock | None = None) -> LeaderLease:
    return LeaderLease(name, NAMESPACE, identity, term=TERM, clock=clock or Clock())


def _spec(kube_client: Any, name: str) -> Any:
    return client.CoordinationV1Api(kube_client).read_namespaced_lease(name, NAMESPACE).spec


def test_of_two_contenders_at_once_exactly_one_leads(kube_client: Any, lease_name: str) -> None:
    contenders = [_contender(lease_name, identity) for identity in ("a", "b")]
    start = threading.Barrier(2)
    outcomes: dict[str, Round] = {}

    def contend(lease: LeaderLease) -> None:
        start.wait()
        outcomes[lease.identity] = lease.try_hold(kube_client)

    threads = [threading.Thread(target=contend, args=(c,)) for c in contenders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcome.value for outcome in outcomes.values()) == ["acquired", "following"]
    winner = next(identity for identity, outcome in outcomes.items() if outcome.leading)
    spec = _spec(kube_client, lease_name)
    assert spec.holder_identity == winner
    assert spec.lease_duration_seconds == 15 and spec.lease_transitions == 0
    assert [c.leading for c in contenders] == [c.identity == winner for c in contenders]


def test_renewal_keeps_the_lease_past_its_first_term(kube_client: Any, lease_name: str) -> None:
    follower_clock = Clock()
    leader = _contender(lease_name, "a")
    follower = _contender(lease_name, "b", follower_clock)
    assert leader.try_hold(kube_client) is Round.ACQUIRED
    assert follower.try_hold(kube_client) is Round.FOLLOWING
    acquired = _spec(kube_client, lease_name)

    assert leader.try_hold(kube_client) is Round.RENEWED
    follower_clock.now += TERM  # the first term is over, but the follower sees a renewal
    assert follower.try_hold(kube_client) is Round.FOLLOWING

    renewed = _spec(kube_client, lease_name)
    assert renewed.holder_identity == "a" and follower.holder == "a"
    assert renewed.renew_time > acquired.renew_time
    assert renewed.acquire_time == acquired.acquire_time
    assert renewed.lease_transitions == 0


def test_an_expired_term_is_taken_over_and_counted(kube_client: Any, lease_name: str) -> None:
    follower_clock = Clock()
    leader = _contender(lease_name, "a")
    follower = _contender(lease_name, "b", follower_clock)
    assert leader.try_hold(kube_client) is Round.ACQUIRED
    assert follower.try_hold(kube_client) is Round.FOLLOWING
    acquired = _spec(kube_client, lease_name)

    follower_clock.now += TERM - 1
    assert follower.try_hold(kube_client) is Round.FOLLOWING
    follower_clock.now += 1
    assert follower.try_hold(kube_client) is Round.ACQUIRED

    taken = _spec(kube_client, lease_name)
    assert taken.holder_identity == "b"
    assert taken.lease_transitions == 1
    assert taken.acquire_time > acquired.acquire_time
    assert leader.try_hold(kube_client) is Round.LOST  # its renewal meets the new holder's write
    assert not leader.leading


def test_a_conflicting_update_is_reported_as_lost(kube_client: Any, lease_name: str) -> None:
    leader = _contender(lease_name, "a")
    assert leader.try_hold(kube_client) is Round.ACQUIRED
    client.CoordinationV1Api(kube_client).patch_namespaced_lease(
        lease_name, NAMESPACE, {"metadata": {"labels": {"touched": "elsewhere"}}}
    )

    assert leader.try_hold(kube_client) is Round.LOST
    assert not leader.leading


def test_no_successful_round_for_a_whole_term_is_lost(kube_client: Any, lease_name: str) -> None:
    clock = Clock()
    leader = _contender(lease_name, "a", clock)
    assert leader.try_hold(kube_client) is Round.ACQUIRED
    nowhere = client.Configuration()
    nowhere.host = "https://127.0.0.1:1"  # nothing listens: every round is unreachable
    nowhere.retries = 0
    with client.ApiClient(nowhere) as unreachable:
        clock.now += TERM - 1
        assert leader.try_hold(unreachable) is Round.FAILED
        assert leader.leading
        clock.now += 1
        assert leader.try_hold(unreachable) is Round.LOST
    assert not leader.leading


def test_a_released_lease_is_taken_without_waiting_out_the_term(
    kube_client: Any, lease_name: str
) -> None:
    leader = _contender(lease_name, "a")
    follower = _contender(lease_name, "b")
    assert leader.try_hold(kube_client) is Round.ACQUIRED
    assert follower.try_hold(kube_client) is Round.FOLLOWING

    assert leader.release(kube_client)
    assert follower.try_hold(kube_client) is Round.ACQUIRED

    spec = _spec(kube_client, lease_name)
    assert spec.holder_identity == "b" and spec.lease_transitions == 1
