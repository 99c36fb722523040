"""What legs 4 (operator) and 5 (node agent) share: one component of the chart, applied to the node.

``helm template`` renders the whole chart with the component switched on; the objects labelled
with that component (plus the CRDs, which ``helm template`` leaves out) are created with the
API client, into a namespace of the test's own, and deleted again at the end. This is the chart
exactly as users install it, without the webhook half (its image and registration are leg 1's
business), and it needs no ``kubectl``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client, utils  # type: ignore[import-untyped]
from kubernetes.stream import stream  # type: ignore[import-untyped]
from prometheus_client.parser import text_string_to_metric_families

from tests.chart.support import CHART, documents, helm_template
from tests.e2e.support import NODE_REGISTRATION

T = TypeVar("T")
COMPONENT = "app.kubernetes.io/component"


def wait_for(predicate: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``predicate`` every 0.1 s until it answers something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def render_component(
    helm_bin: Path, scratch: Path, namespace: str, component: str, *sets: str
) -> list[dict[str, Any]]:
    """The chart's objects of one component, as ``helm install`` would create them (with the
    node's ``nodeAgent.registration``, which a later ``sets`` pair overrides)."""
    node = f"nodeAgent.registration={NODE_REGISTRATION}"
    rendered = helm_template(helm_bin, scratch, node, *sets, namespace=namespace)
    return [
        doc
        for doc in documents(rendered.stdout)
        if doc.get("metadata", {}).get("labels", {}).get(COMPONENT) == component
    ]


def chart_crds() -> list[dict[str, Any]]:
    """The CRDs ``helm install`` creates from the chart's ``crds/`` (``helm template`` omits them)."""
    return [yaml.safe_load(p.read_text()) for p in sorted((CHART / "crds").glob("*.yaml"))]


def new_namespace(core: Any, prefix: str = "e2e") -> str:
    """A fresh namespace, once its ``default`` ServiceAccount exists (admission needs it)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})

    def ready() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
        except client.ApiException:
            return False
        return True

    wait_for(ready, 30, f"the default ServiceAccount in {name}")
    return name


@contextmanager
def applied(api_client: Any, objects: list[dict[str, Any]], namespace: str) -> Iterator[None]:
    """Create ``objects`` (namespaced ones in ``namespace``); delete them all afterwards.

    A CRD that is already there (the session's chart release installed the chart's CRDs) is
    used as it is, and left to whoever created it.
    """
    made: list[dict[str, Any]] = []
    try:
        for obj in objects:
            if obj["kind"] == "CustomResourceDefinition" and _crd_exists(api_client, obj):
                continue
            utils.create_from_dict(api_client, obj, namespace=namespace)
            made.append(obj)
        yield
    finally:
        for obj in reversed(made):
            _delete(api_client, obj, namespace)


def _crd_exists(api_client: Any, crd: dict[str, Any]) -> bool:
    try:
        client.ApiextensionsV1Api(api_client).read_custom_resource_definition(
            crd["metadata"]["name"]
        )
    except client.ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def _delete(api_client: Any, obj: dict[str, Any], namespace: str) -> None:
    kind, name = obj["kind"], obj["metadata"]["name"]
    calls: dict[str, Callable[[], Any]] = {
        "DaemonSet": lambda: client.AppsV1Api(api_client).delete_namespaced_daemon_set(
            name, namespace, propagation_policy="Foreground"
        ),
        "Deployment": lambda: client.AppsV1Api(api_client).delete_namespaced_deployment(
            name, namespace, propagation_policy="Foreground"
        ),
        "ServiceAccount": lambda: client.CoreV1Api(api_client).delete_namespaced_service_account(
            name, namespace
        ),
        "Service": lambda: client.CoreV1Api(api_client).delete_namespaced_service(name, namespace),
        "CSIDriver": lambda: client.StorageV1Api(api_client).delete_csi_driver(name),
        "ClusterRole": lambda: client.RbacAuthorizationV1Api(api_client).delete_cluster_role(name),
        "ClusterRoleBinding": lambda: client.RbacAuthorizationV1Api(
            api_client
        ).delete_cluster_role_binding(name),
        "Role": lambda: client.RbacAuthorizationV1Api(api_client).delete_namespaced_role(
            name, namespace
        ),
        "RoleBinding": lambda: client.RbacAuthorizationV1Api(
            api_client
        ).delete_namespaced_role_binding(name, namespace),
        "CustomResourceDefinition": lambda: client.ApiextensionsV1Api(
            api_client
        ).delete_custom_resource_definition(name),
    }
    call = calls.get(kind)
    if call is None:
        return
    try:
        call()
    except client.ApiException as error:
        if error.status != 404:
            raise


def exec_in(core: Any, namespace: str, pod: str, container: str, *command: str) -> str:
    """The command's stdout, byte for byte.

    Read from the websocket rather than returned by ``stream()``: with preloaded content the
    client "deserializes" an output that parses as JSON and hands back its Python ``repr``.
    """
    session = stream(
        core.connect_get_namespaced_pod_exec, pod, namespace, container=container,
        command=list(command), stderr=True, stdout=True, stdin=False, tty=False,
        _preload_content=False,
    )  # fmt: skip
    try:
        session.run_forever(timeout=60)
        out: str = session.read_stdout()
    finally:
        session.close()
    return out


def is_ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


def pod_trouble(core: Any, namespace: str, name: str) -> str:
    """Events and the tail of each container's log, for a failure message."""
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    lines = [f"{e.reason}: {e.message}" for e in events.items]
    try:
        pod = core.read_namespaced_pod(name, namespace)
    except client.ApiException:
        return "\n".join(lines)
    for status in pod.status.container_statuses or []:
        try:
            text = core.read_namespaced_pod_log(
                name, namespace, container=status.name, _preload_content=False
            ).data.decode(errors="replace")
        except client.ApiException as err:
            text = f"(no log: {err.status})"
        lines.append(f"--- {status.name} (restarts {status.restart_count}) ---\n{text[-2000:]}")
    return "\n".join(lines)


def wait_pod_ready(core: Any, namespace: str, name: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            pod = core.read_namespaced_pod(name, namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise
            pod = None
        if pod is not None and is_ready(pod):
            return pod
        if pod is not None:
            assert pod.status.phase not in ("Failed", "Succeeded"), pod_trouble(
                core, namespace, name
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"pod {namespace}/{name} not Ready after {timeout} s\n"
                + pod_trouble(core, namespace, name)
            )
        time.sleep(0.2)


def wait_pod_gone(core: Any, namespace: str, name: str, timeout: float = 60) -> None:
    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, namespace)
        except client.ApiException as error:
            return error.status == 404
        return False

    wait_for(gone, timeout, f"pod {namespace}/{name} deleted")


def pod_metrics(core: Any, namespace: str, pod: str, port: int, prefix: str) -> dict[str, float]:
    """A pod's Prometheus exposition, through the apiserver's pod proxy; samples by name."""
    answer = core.connect_get_namespaced_pod_proxy_with_path(
        f"{pod}:{port}", namespace, "metrics", _preload_content=False
    )
    text = answer.data.decode()  # preloaded, the client hands back the bytes' repr
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith(prefix)
    }


def working_set_mib(core: Any, node: str, namespace: str, pod: str) -> float | None:
    """The pod's memory working set from the kubelet's summary API (through the apiserver)."""
    answer = core.connect_get_node_proxy_with_path(node, "stats/summary", _preload_content=False)
    summary = yaml.safe_load(answer.data)
    for entry in summary.get("pods", []):
        ref = entry["podRef"]
        if ref["namespace"] == namespace and ref["name"] == pod:
            working = float(entry.get("memory", {}).get("workingSetBytes") or 0)
            return working / 2**20 or None  # 0: the kubelet has not sampled it yet
    return None


def memory_note(mib: float | None, limit: int) -> str:
    measured = f"{mib:.0f} MiB" if mib else "not sampled yet"
    return f"working set {measured} (limit {limit} MiB)"
