"""The suite's own instruments: the JSON-patch applier, the bounded worker, the leak check."""

from __future__ import annotations

import time

import pytest

from tests.fuzz.support import SECRET, MiB, PatchError, apply_json_patch, leaked, worker
from tests.fuzz.workloads import allocate

pytestmark = pytest.mark.fuzz


def test_patch_applier_refuses_an_add_under_a_missing_parent() -> None:
    with pytest.raises(PatchError):
        apply_json_patch({"spec": {}}, [{"op": "add", "path": "/spec/containers/-", "value": 1}])


def test_patch_applier_refuses_an_index_past_the_end_and_a_missing_remove() -> None:
    with pytest.raises(PatchError):
        apply_json_patch({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 1}])
    with pytest.raises(PatchError):
        apply_json_patch({"a": {}}, [{"op": "remove", "path": "/a/b"}])


def test_patch_applier_applies_what_the_api_server_applies() -> None:
    pod = {"metadata": {}, "spec": {"containers": [{"name": "app"}]}}
    ops = [
        {"op": "add", "path": "/metadata/annotations", "value": {}},
        {"op": "add", "path": "/metadata/annotations/a~1b", "value": "x"},
        {"op": "add", "path": "/spec/containers/0/volumeMounts", "value": []},
        {"op": "add", "path": "/spec/containers/-", "value": {"name": "agent"}},
        {"op": "replace", "path": "/spec/containers/0/command", "value": ["sh"]},
    ]
    patched = apply_json_patch(pod, ops)
    assert patched["metadata"]["annotations"] == {"a/b": "x"}
    assert [c["name"] for c in patched["spec"]["containers"]] == ["app", "agent"]
    assert patched["spec"]["containers"][0]["command"] == ["sh"]
    assert pod == {"metadata": {}, "spec": {"containers": [{"name": "app"}]}}


def test_worker_reports_a_hang_as_a_timeout_and_carries_on() -> None:
    outcome = worker().call(time.sleep, 5, deadline=0.5)
    assert outcome.status == "timeout"
    assert worker().call(len, "abc", deadline=30).value == 3


def test_worker_measures_the_peak_memory_of_one_call() -> None:
    outcome = worker().call(allocate, 64 * MiB, deadline=30)
    assert outcome.status == "ok"
    assert outcome.peak_bytes >= 60 * MiB
    assert worker().call(len, "abc", deadline=30).peak_bytes < 16 * MiB


def test_leak_check_sees_a_slice_of_the_secret() -> None:
    assert leaked(f"value {SECRET[3:12]} here") == SECRET
    assert leaked("the template failed at line 1") is None
