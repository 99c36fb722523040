"""The controller's timing rules and its queue, without an API server."""

from __future__ import annotations

import threading

import pytest

from dynconf.errors import InvalidError
from dynconf.pipeline import env_entries, verbatim_entries
from dynconf_k8s.operator.controller import WorkQueue, backoff_seconds, spread
from dynconf_k8s.operator.reconcile import owner_reference
from dynconf_k8s.operator.types import DynamicConfigRender


def test_failures_back_off_from_5s_doubling_to_300s() -> None:
    assert [backoff_seconds(n) for n in range(1, 9)] == [5, 10, 20, 40, 80, 160, 300, 300]


def test_spread_stays_within_a_quarter() -> None:
    waits = [spread(100.0) for _ in range(2000)]
    assert 75.0 <= min(waits) < 80.0 and 120.0 < max(waits) <= 125.0


def test_queue_keeps_the_earliest_due_time_once_per_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a", 60)
    queue.add("a", 0)
    queue.add("a", 30)
    assert len(queue) == 1
    assert queue.get(threading.Event()) == "a"


def test_queue_never_hands_a_key_being_processed_to_another_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    stop = threading.Event()
    queue.add("a")
    assert queue.get(stop) == "a"
    queue.add("a")  # arrives while "a" is processed: deferred, not handed out twice
    queue.add("b")
    assert queue.get(stop) == "b"
    queue.done("a")
    assert queue.get(stop) == "a"


def test_env_entries_upper_snake_and_verbatim_entries_keep_paths() -> None:
    document = {"db": {"pool-size": 5, "host": "h"}, "off": None, "on": True, "$schema": "x"}
    assert env_entries(document) == {"DB_POOL_SIZE": "5", "DB_HOST": "h", "OFF": "", "ON": "true"}
    assert verbatim_entries(document) == {
        "db.pool-size": "5",
        "db.host": "h",
        "off": "",
        "on": "true",
    }


def test_env_entries_refuse_two_leaves_spelling_one_variable() -> None:
    with pytest.raises(InvalidError, match=r"`a\.b` and `a_b` both become the variable A_B"):
        env_entries({"a": {"b": 1}, "a_b": 2})


def test_retain_owner_reference_is_omitted_not_null() -> None:
    render = DynamicConfigRender.from_api(
        {
            "metadata": {"name": "r", "namespace": "n", "uid": "u-1", "generation": 2},
            "spec": {"class": "c", "key": "k", "target": {"configMap": "m", "file": "f.json"}},
        }
    )
    assert owner_reference(render) == {
        "apiVersion": "dynamic-config.rs/v1alpha1",
        "kind": "DynamicConfigRender",
        "name": "r",
        "uid": "u-1",
        "controller": True,
    }
    assert render.spec.interval_seconds == 15 and render.spec.target.deletion_policy == "Delete"
