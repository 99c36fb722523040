"""The operator at scale on the test API server: N Renders over one consul class.

Run from the repo root: ``uv run python bench/operator_scale.py [N]`` (default 500; issue 19's
shape is 5000). Uses the kube control plane and Consul that ``scripts/testenv`` publishes
(start them first). Installs the CRDs, creates one namespace, one consul class and N Renders
(interval 60 s), then starts ``dynamic-config-operator`` as a subprocess (admin kubeconfig, 4
workers, no election) and measures:

- cold start to every Render ``Ready=True`` (target <= 60 s, RSS <= 256 MiB), seen through a
  watch;
- the CPU seconds each process spent in that cold start: the operator, and the control plane
  beside it (kube-apiserver, its etcd, the controller manager, Consul; their pids from
  ``.testenv/pids``). ``control_plane_floor_seconds`` is the control plane's CPU spread over
  every core of the machine: no operator, however cheap, finishes sooner on these cores;
- steady-state writes: ConfigMap and Render resourceVersions compared across one full
  interval with nothing changed (target 0 writes);
- the operator's RSS from ``/proc`` once all are Ready.

``--calls N`` measures instead what each of a first render's API calls costs the control
plane: N of each call made one after another (a missing target's read, the target's
server-side apply, a status merge patch, an Event; and the steady state's read of a present
target and a no-op apply), with the CPU per call of kube-apiserver, its etcd and this client.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from agent_latency import cpu_seconds
from kubernetes import client, config, watch  # type: ignore[import-untyped]
from results import record

from dynconf_k8s.operator.cluster import Cluster
from dynconf_k8s.operator.crds import crd_manifests
from dynconf_k8s.operator.reconcile import RENDERED_MESSAGE, RENDERED_NOTE, owner_reference
from dynconf_k8s.operator.targets import TargetRef
from dynconf_k8s.operator.types import (
    API_VERSION,
    GROUP,
    PLURALS,
    RENDER_KIND,
    VERSION,
    DynamicConfigRender,
    Reason,
)

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / ".testenv"
OPERATOR = Path(sys.executable).with_name("dynamic-config-operator")
INTERVAL = 60
CONTROL_PLANE = ("kube-apiserver", "kube-etcd", "kube-controller-manager", "consul")


def control_plane_cpu() -> dict[str, float]:
    """CPU seconds so far of each control-plane process the test environment recorded."""
    seconds = {}
    for name in CONTROL_PLANE:
        try:
            seconds[name] = cpu_seconds(int((RUN / "pids" / f"{name}.pid").read_text()))
        except (OSError, ValueError):
            continue  # not running here (the controller manager is optional)
    return seconds


def delete_namespace(core: client.CoreV1Api, name: str, timeout: float = 600.0) -> None:
    """Delete the bench's namespace and wait until it is gone.

    The namespace controller deletes thousands of objects after the call returns; a run
    started before they are gone shares the control plane's CPU with that cleanup.
    """
    core.delete_namespace(name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            core.read_namespace(name)
        except client.ApiException as error:
            if error.status == 404:
                return
            raise
        time.sleep(2)
    print(json.dumps({"warning": f"namespace {name} still terminating after {timeout} s"}))


def published(name: str) -> dict[str, str]:
    path = RUN / "published" / f"{name}.env"
    return dict(line.split("=", 1) for line in path.read_text().split())


def ready(item: dict) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (item.get("status") or {}).get("conditions", [])
    )


def install_crds(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    for crd in crd_manifests():
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"],
            crd,
            field_manager="bench",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    time.sleep(2)  # CRD establishment (one-off setup, not measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("renders", nargs="?", type=int, default=500)
    parser.add_argument("--calls", type=int, metavar="N", help="the per-call costs instead")
    args = parser.parse_args()
    kube = published("kube")
    kubeconfig = kube["DYNCONF_TEST_KUBECONFIG"]
    config.load_kube_config(config_file=kubeconfig)
    api = client.ApiClient()
    install_crds(api)
    if args.calls:
        call_costs(api, args.calls)
    else:
        scale(api, kubeconfig, args.renders)


def scale(api: client.ApiClient, kubeconfig: str, count: int) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    consul = published("consul")
    import consul as consul_client  # type: ignore[import-untyped]

    host, port = consul["DYNCONF_TEST_CONSUL_ADDR"].rsplit(":", 1)
    key = f"bench-{uuid.uuid4().hex[:6]}/config.json"
    consul_client.Consul(host=host, port=int(port)).kv.put(key, json.dumps({"port": 9000}))
    ns = f"bench-op-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "dynamicconfigclasses",
        {
            "apiVersion": API_VERSION,
            "kind": "DynamicConfigClass",
            "metadata": {"name": "consul"},
            "spec": {"source": "consul", "endpoint": consul["DYNCONF_TEST_CONSUL_URL"]},
        },
    )
    for index in range(count):
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            ns,
            "dynamicconfigrenders",
            {
                "apiVersion": API_VERSION,
                "kind": "DynamicConfigRender",
                "metadata": {"name": f"r{index}"},
                "spec": {
                    "class": "consul",
                    "key": key,
                    "intervalSeconds": INTERVAL,
                    "target": {"configMap": f"cm{index}", "file": "config.toml"},
                },
            },
        )
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "DYNAMIC_CONFIG_OPERATOR_METRICS_ADDR": "127.0.0.1:0",
    }
    for name in ("POD_NAME", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST"):
        env.pop(name, None)
    plane_before = control_plane_cpu()
    started = time.monotonic()
    process = subprocess.Popen([str(OPERATOR)], env=env, stdout=subprocess.DEVNULL)
    try:
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "dynamicconfigrenders")
        done = {i["metadata"]["name"] for i in listed["items"] if ready(i)}
        stream = watch.Watch()
        for event in stream.stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            ns,
            "dynamicconfigrenders",
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=300,
        ):
            if ready(event["object"]):
                done.add(event["object"]["metadata"]["name"])
            if len(done) >= count:
                stream.stop()
        cold = time.monotonic() - started
        operator_cpu = cpu_seconds(process.pid)
        plane = {
            name: seconds - plane_before.get(name, 0.0)
            for name, seconds in control_plane_cpu().items()
        }
        rss = next(
            int(line.split()[1])
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
            if line.startswith("VmRSS:")
        )
        before = {
            **{
                c.metadata.name: c.metadata.resource_version
                for c in core.list_namespaced_config_map(ns).items
            },
            **{
                r["metadata"]["name"]: r["metadata"]["resourceVersion"]
                for r in custom.list_namespaced_custom_object(
                    GROUP, VERSION, ns, "dynamicconfigrenders"
                )["items"]
            },
        }
        time.sleep(INTERVAL * 1.3)  # one full interval (+25 % spread) with nothing changed
        after = {
            **{
                c.metadata.name: c.metadata.resource_version
                for c in core.list_namespaced_config_map(ns).items
            },
            **{
                r["metadata"]["name"]: r["metadata"]["resourceVersion"]
                for r in custom.list_namespaced_custom_object(
                    GROUP, VERSION, ns, "dynamicconfigrenders"
                )["items"]
            },
        }
        writes = sum(1 for name, rv in after.items() if before.get(name) != rv)
        result = {
            "renders": count,
            "cold_start_to_all_ready_seconds": round(cold, 1),
            "cpu_seconds_in_cold_start": {
                "dynamic-config-operator": round(operator_cpu, 1),
                **{name: round(seconds, 1) for name, seconds in plane.items()},
            },
            "operator_cpu_ms_per_render": round(operator_cpu / count * 1000, 2),
            "control_plane_floor_seconds": round(sum(plane.values()) / (os.cpu_count() or 1), 1),
            "steady_state_writes_per_interval": writes,
            "operator_rss_mib": round(rss / 1024, 1),
        }
        print(json.dumps(result))
        record("operator_scale", {
            f"renders_{count}.{name}": value
            for name, value in result.items()
            if isinstance(value, int | float) and name != "renders"
        })  # fmt: skip
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        delete_namespace(core, ns)


def call_costs(api: client.ApiClient, count: int) -> None:
    """``count`` of each of a render's API calls in a row, made through the operator's own
    :class:`Cluster`, and the CPU each cost per call."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    cluster = Cluster(api, identity="bench")
    ns = f"bench-calls-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    renders = []
    for index in range(count):
        renders.append(DynamicConfigRender.from_api(custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURALS[RENDER_KIND], {
                "apiVersion": API_VERSION, "kind": RENDER_KIND, "metadata": {"name": f"r{index}"},
                "spec": {"class": "consul", "key": "bench/config.json",
                         "intervalSeconds": INTERVAL,
                         "target": {"configMap": f"cm{index}", "file": "config.toml"}},
            },
        )))  # fmt: skip
    targets = [TargetRef("ConfigMap", f"cm{index}") for index in range(count)]
    data = {"config.toml": "port = 9000\n"}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {"type": "Ready", "status": "True", "reason": Reason.RENDERED,
             "message": RENDERED_MESSAGE, "lastTransitionTime": now}  # fmt: skip
    status = {"observedGeneration": 1, "lastError": None, "renderedAt": now, "conditions": [ready]}

    def read(index: int) -> None:
        cluster.read_target(targets[index], ns)

    def apply(index: int) -> None:
        cluster.apply_target(targets[index], ns, data, [owner_reference(renders[index])])

    def patch_status(index: int) -> None:
        cluster.patch_status(renders[index], status)

    def event(index: int) -> None:
        cluster.post_event(renders[index], "Normal", Reason.RENDERED, RENDERED_NOTE)

    calls: list[tuple[str, Callable[[int], None]]] = [
        ("read a missing target", read),
        ("apply the target (create)", apply),
        ("merge-patch the status", patch_status),
        ("create the Event", event),
        ("read a present target (steady state)", read),
        ("apply the same target (no-op)", apply),
    ]
    try:
        time.sleep(5)  # let the controller manager settle after the creates
        rows = []
        for label, call in calls:
            before, mine, started = control_plane_cpu(), time.process_time(), time.monotonic()
            for index in range(count):
                call(index)
            wall = time.monotonic() - started
            spent = {name: s - before.get(name, 0.0) for name, s in control_plane_cpu().items()}
            rows.append({
                "call": label,
                "wall_ms": round(wall / count * 1000, 2),
                "kube_apiserver_cpu_ms": round(spent.get("kube-apiserver", 0.0) / count * 1000, 2),
                "kube_etcd_cpu_ms": round(spent.get("kube-etcd", 0.0) / count * 1000, 2),
                "client_cpu_ms": round((time.process_time() - mine) / count * 1000, 2),
            })  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
        first = rows[:4]
        print(json.dumps({
            "first_render_control_plane_cpu_ms": round(
                sum(r["kube_apiserver_cpu_ms"] + r["kube_etcd_cpu_ms"] for r in first), 2),
            "first_render_client_cpu_ms": round(sum(r["client_cpu_ms"] for r in first), 2),
        }))  # fmt: skip
    finally:
        delete_namespace(core, ns)


if __name__ == "__main__":
    main()
