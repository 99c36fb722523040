"""The operator's renders of one store share one call account and one budget; a read the budget
holds back is deferred, not a failure of the Render."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dynconf.budget import Budget, ledger
from dynconf.stores import StoreSpec
from dynconf_k8s.operator.manager import Operator
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.targets import fetch_document

from .test_reconcile import file_class, has_data, render, write_doc


@pytest.fixture
def two_specs(consul_server: Any) -> Iterator[tuple[StoreSpec, StoreSpec]]:
    keys = [f"operator-budget/{uuid.uuid4().hex}.json" for _ in range(2)]
    for key in keys:
        consul_server.client.kv.put(key, json.dumps({"k": key}))
    # the endpoint as one Render spells it, and another with a trailing path
    yield (
        StoreSpec(source="consul", endpoint=consul_server.url, key=keys[0]),
        StoreSpec(source="consul", endpoint=consul_server.url.rstrip("/") + "/", key=keys[1]),
    )
    for key in keys:
        consul_server.client.kv.delete(key)
    ledger().configure({})


def test_two_renders_of_one_store_share_one_bucket_and_are_counted(
    two_specs: tuple[StoreSpec, StoreSpec],
) -> None:
    first, second = two_specs
    calls = ledger().for_spec(first)
    assert ledger().for_spec(second) is calls
    ledger().configure({"consul": Budget(rate=10.0, burst=1)})
    before = calls.counts()
    started = time.monotonic()
    for _ in range(3):
        fetch_document(first)
        fetch_document(second)
    took = time.monotonic() - started
    after = calls.counts()
    assert after["ok"] - before["ok"] == 6
    assert after["budget"] - before["budget"] == 5  # one bucket: the second Render waited too
    assert took >= 5 / 10.0 * 0.9


def test_operator_metrics_carry_the_store_requests(
    two_specs: tuple[StoreSpec, StoreSpec],
) -> None:
    fetch_document(two_specs[0])
    text = OperatorMetrics().exposition().decode()
    assert "# TYPE dynamic_config_operator_store_requests_total counter" in text
    assert 'dynamic_config_operator_store_requests_total{endpoint="http://127.0.0.1:' in text


def _failures_of(caplog: pytest.LogCaptureFixture, render: str) -> int:
    """The reconcile failures the operator logged for one Render (every count of
    ``reconcile_failures`` is logged with the Render it belongs to)."""
    return sum(
        1
        for record in caplog.records
        if record.name == "dynconf_k8s.operator.reconcile"
        and record.getMessage() in {"render_failed", "render_unreadable"}
        and getattr(record, "render", None) == render
    )


def test_a_read_the_budget_holds_back_leaves_the_render_ready_and_is_no_failure(
    operator: Operator,
    kube: Any,
    namespace: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_doc(tmp_path, {"port": 9000})
    file_class(kube, namespace, tmp_path)
    # The operator follows every namespace, so other Renders fail beside this one: an earlier
    # test's namespace still terminating (its class deleted before its Render) did in CI. This
    # neighbour, whose class does not exist, fails on its backoff; its failures are not ours.
    render(
        kube, namespace, "orphan", {"configMap": "orphan", "file": "app.json"}, **{"class": "gone"}
    )
    render(kube, namespace, "billing", {"configMap": "billing", "file": "app.json"})
    kube.await_configmap(namespace, "billing", has_data("app.json", "9000"))
    kube.await_render(namespace, "billing", kube.ready("Rendered"))
    ledger().configure({"file": Budget(rate=0.01, burst=1)})  # one read, then none for 100 s
    ours = f"{namespace}/billing"
    try:
        [calls] = [c for c in ledger().accounts() if c.store == "file"]

        def held_back(count: int) -> None:
            deadline = time.monotonic() + 30
            while calls.counts()["budget"] < count:  # re-read every interval (1 s), held back
                assert time.monotonic() < deadline, "the Render was not re-read"
                time.sleep(0.1)

        # The baseline is taken once the budget has held a read back: a reconcile the first
        # render's own status write set off (which may land on either side of the budget's
        # arrival on a loaded machine) is then over, and only held reads follow.
        held_back(calls.counts()["budget"] + 1)
        failures = _failures_of(caplog, ours)
        before = [e["reason"] for e in kube.events(namespace, "billing")].count("RenderFailed")
        held_back(calls.counts()["budget"] + 3)
        item = kube.await_render(namespace, "billing", kube.ready("Rendered"))
        after = [e["reason"] for e in kube.events(namespace, "billing")].count("RenderFailed")
    finally:
        ledger().configure({})
    assert "lastError" not in item["status"]
    assert after == before, "a held-back read posted RenderFailed"
    assert _failures_of(caplog, ours) == failures, "a held-back read counted as a failure"
    assert _failures_of(caplog, f"{namespace}/orphan") >= 1, "the neighbour's failures are seen"
