"""The operator's OTLP traces: one ``reconcile`` span per Render with namespace, name, outcome.

The spans come from the operator's own :class:`~dynconf_k8s.operator.reconcile.Reconciler`
wired to :func:`dynconf.tracing.tracing_from_env` as ``dynamic-config-operator`` (what
``run()`` does) and exported to the loopback collector of :mod:`tests.fixtures.otlp`. The
API server is a recording stand-in, so this needs no control plane: what is under test is
what leaves the process, not the writes (``test_reconcile.py`` covers those against the real
API server).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from dynconf.tracing import ENDPOINT_ENV, tracing_from_env
from dynconf_k8s.operator.cluster import ExistingTarget
from dynconf_k8s.operator.main import SERVICE_NAME
from dynconf_k8s.operator.metrics import OperatorMetrics
from dynconf_k8s.operator.reconcile import ReconcileFailed, Reconciler
from tests.fixtures.otlp import Receiver


class RecordingCluster:
    """The API calls a reconcile makes, answered in memory."""

    def __init__(self) -> None:
        self.targets: dict[tuple[str, str], dict[str, str]] = {}
        self.owners: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def read_token(self, namespace: str, name: str, key: str) -> str:
        raise AssertionError("no class here names a token Secret")

    def read_target(self, ref: Any, namespace: str) -> ExistingTarget | None:
        data = self.targets.get((namespace, ref.name))
        if data is None:
            return None
        return ExistingTarget(data=data, owner_references=self.owners[(namespace, ref.name)])

    def apply_target(
        self, ref: Any, namespace: str, data: dict[str, str], owners: list[dict[str, Any]]
    ) -> None:
        self.targets[(namespace, ref.name)] = dict(data)
        self.owners[(namespace, ref.name)] = list(owners)

    def patch_status(self, render: Any, status: dict[str, Any]) -> None:
        return None

    def post_event(self, render: Any, kind: str, reason: str, message: str) -> None:
        return None


class Classes:
    def __init__(self, root: Path) -> None:
        self.root = root

    def namespaced_class(self, namespace: str, name: str) -> dict[str, Any] | None:
        if name != "files":
            return None
        return {"metadata": {"name": name, "namespace": namespace},
                "spec": {"source": "file", "endpoint": str(self.root)}}  # fmt: skip

    def cluster_class(self, name: str) -> dict[str, Any] | None:
        return None


def _render(name: str, class_name: str = "files") -> dict[str, Any]:
    return {
        "apiVersion": "dynamic-config.rs/v1alpha1",
        "kind": "DynamicConfigRender",
        "metadata": {"name": name, "namespace": "team-a", "uid": uuid.uuid4().hex,
                     "generation": 1},
        "spec": {"class": class_name, "key": "app/config.json", "intervalSeconds": 30,
                 "target": {"configMap": f"{name}-out", "file": "config.json"}},
    }  # fmt: skip


def test_reconcile_spans_name_the_render_and_outcome_without_values(
    otlp_receiver: Receiver, tmp_path: Path
) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    document = tmp_path / "app" / "config.json"
    document.parent.mkdir()
    document.write_text(json.dumps({"db": {"password": secret}}))
    tracing = tracing_from_env({ENDPOINT_ENV: otlp_receiver.url}, SERVICE_NAME)
    cluster = RecordingCluster()
    reconciler = Reconciler(cluster, Classes(tmp_path), OperatorMetrics(), tracing=tracing)

    billing = _render("billing")
    assert reconciler.reconcile(billing) == 30.0
    assert secret in cluster.targets[("team-a", "billing-out")]["config.json"]
    reconciler.reconcile(billing)  # the same document again: nothing written
    with pytest.raises(ReconcileFailed):
        reconciler.reconcile(_render("orphan", class_name="nowhere"))
    tracing.shutdown()

    spans = otlp_receiver.wait_for(["reconcile"])
    reconciles = [span for span in spans if span.name == "reconcile"]
    assert {span.service for span in reconciles} == {"dynamic-config-operator"}
    seen = [(s.attributes["namespace"], s.attributes["name"], s.attributes["outcome"])
            for s in reconciles]  # fmt: skip
    assert seen == [
        ("team-a", "billing", "written"),
        ("team-a", "billing", "unchanged"),
        ("team-a", "orphan", "ClassNotFound"),
    ]
    assert reconciles[2].attributes["error.type"] == "ReconcileFailed"
    assert otlp_receiver.leaked(secret) == []
