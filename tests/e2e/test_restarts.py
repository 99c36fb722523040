"""Restart on change on a kubelet: the chart's operator with ``operator.restarts.enabled=true``
replaces the pods of a Deployment that asked, when the Secret it reads its environment from
changes, and leaves the pods of one that did not ask alone.

The pods read ``PORT`` from ``envFrom`` a Render's Secret — frozen at container start, the case
restarts exist for. The proof is the pod's UID (a new pod) and the new pod's environment.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from dynconf_k8s.operator.restarts import FINGERPRINT_ANNOTATION, RESTART_ANNOTATION
from tests.e2e.opnode_support import (
    exec_in,
    new_namespace,
    render_component,
    wait_for,
)
from tests.e2e.test_operator import OperatorOnNode, _app, operator_running
from tests.fixtures.node import KubeNode, ProjectImage

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def restarting(
    kube_node: KubeNode,
    kube_node_client: object,
    node_image: ProjectImage,
    helm_bin: Path,
    consul_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorOnNode]:
    """The chart's operator with restarts on (1 s settle, 5 s floor), Ready on the node."""
    node_image("operator")
    core = client.CoreV1Api(kube_node_client)
    system = new_namespace(core, "dc-rs")
    apps = new_namespace(core)
    objects = render_component(
        helm_bin,
        tmp_path_factory.mktemp("chart"),
        system,
        "operator",
        "operator.enabled=true",
        "operator.restarts.enabled=true",
        "operator.restarts.settleSeconds=1",
        "operator.restarts.minIntervalSeconds=5",
    )
    with operator_running(kube_node, kube_node_client, consul_server, system, apps, objects) as (
        handle,
        _,
    ):
        try:
            yield handle
        finally:
            core.delete_namespace(apps)
    core.delete_namespace(system)


def _deployment(name: str, asked: bool) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "annotations": {RESTART_ANNOTATION: "true"} if asked else {},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        _app("exec sleep 3600", envFrom=[{"secretRef": {"name": "app-env"}}])
                    ],
                },
            },
        },
    }


def _running(core: Any, namespace: str, app: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None
        and p.status.phase == "Running"
        and all(s.ready for s in p.status.container_statuses or [])
    ]


def test_a_changed_secret_replaces_the_pods_of_the_deployment_that_asked(
    restarting: OperatorOnNode,
) -> None:
    node, core = restarting, restarting.core
    apps_api = client.AppsV1Api(core.api_client)
    key = f"e2e-rs/{uuid.uuid4().hex[:8]}/app.json"
    node.put(key, {"port": 9000})
    node.render(node.apps, "env", key, {"secret": "app-env", "shape": "envEntries"})
    node.kube.await_secret(node.apps, "app-env", lambda s: "PORT" in (s.get("data") or {}))
    for name, asked in (("asked", True), ("silent", False)):
        apps_api.create_namespaced_deployment(node.apps, _deployment(name, asked))
    before = {}
    for name in ("asked", "silent"):
        (pod,) = wait_for(lambda name=name: _running(core, node.apps, name), 120, f"{name} pod")
        before[name] = pod
        port = exec_in(core, node.apps, pod.metadata.name, "app", "sh", "-c", "echo $PORT")
        assert port.strip() == "9000"

    began = time.monotonic()
    node.put(key, {"port": 9100})

    def replaced() -> Any:
        pods = _running(core, node.apps, "asked")
        fresh = [p for p in pods if p.metadata.uid != before["asked"].metadata.uid]
        return fresh[0] if len(pods) == 1 and fresh else None

    pod = wait_for(replaced, 120, "a new pod of the Deployment that asked")
    took = time.monotonic() - began
    port = exec_in(core, node.apps, pod.metadata.name, "app", "sh", "-c", "echo $PORT")
    assert port.strip() == "9100"
    assert FINGERPRINT_ANNOTATION in (pod.metadata.annotations or {})
    (silent,) = _running(core, node.apps, "silent")
    assert silent.metadata.uid == before["silent"].metadata.uid
    assert (silent.status.container_statuses or [])[0].restart_count == 0
    status = node.kube.await_render(node.apps, "env", lambda r: bool(r["status"].get("restarts")))
    assert [(e["kind"], e["name"]) for e in status["status"]["restarts"]] == [
        ("Deployment", "asked")
    ]
    print(f"\ne2e restarts: Consul put -> the Deployment's new pod Ready {took:.1f} s (settle 1 s)")
