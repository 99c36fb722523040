"""The operator at scale on the test API server: 500 Renders over one consul class.

Run from the repo root: ``uv run python bench/operator_scale.py [N]`` (default 500). Uses the
kube control plane and Consul that ``scripts/testenv`` publishes (start them first). Installs
the CRDs, creates one namespace, one consul class and N Renders (interval 60 s), then starts
``dynamic-config-operator`` as a subprocess (admin kubeconfig, 4 workers, no election) and
measures:

- cold start to every Render ``Ready=True`` (target <= 60 s on 2 cores), seen through a watch;
- steady-state writes: ConfigMap and Render resourceVersions compared across one full
  interval with nothing changed (target 0 writes);
- the operator's RSS from ``/proc`` once all are Ready.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kubernetes import client, config, watch  # type: ignore[import-untyped]

from dynconf_k8s.operator.crds import crd_manifests

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / ".testenv"
OPERATOR = Path(sys.executable).with_name("dynamic-config-operator")
INTERVAL = 60


def published(name: str) -> dict[str, str]:
    path = RUN / "published" / f"{name}.env"
    return dict(line.split("=", 1) for line in path.read_text().split())


def ready(item: dict) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (item.get("status") or {}).get("conditions", [])
    )


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    kube, consul = published("kube"), published("consul")
    kubeconfig = kube["DYNCONF_TEST_KUBECONFIG"]
    config.load_kube_config(config_file=kubeconfig)
    api = client.ApiClient()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
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
    import consul as consul_client  # type: ignore[import-untyped]

    host, port = consul["DYNCONF_TEST_CONSUL_ADDR"].rsplit(":", 1)
    key = f"bench-{uuid.uuid4().hex[:6]}/config.json"
    consul_client.Consul(host=host, port=int(port)).kv.put(key, json.dumps({"port": 9000}))
    ns = f"bench-op-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    group, version = "dynamic-config.rs", "v1alpha1"
    custom.create_namespaced_custom_object(
        group,
        version,
        ns,
        "dynamicconfigclasses",
        {
            "apiVersion": f"{group}/{version}",
            "kind": "DynamicConfigClass",
            "metadata": {"name": "consul"},
            "spec": {"source": "consul", "endpoint": consul["DYNCONF_TEST_CONSUL_URL"]},
        },
    )
    for index in range(count):
        custom.create_namespaced_custom_object(
            group,
            version,
            ns,
            "dynamicconfigrenders",
            {
                "apiVersion": f"{group}/{version}",
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
    started = time.monotonic()
    process = subprocess.Popen([str(OPERATOR)], env=env, stdout=subprocess.DEVNULL)
    try:
        listed = custom.list_namespaced_custom_object(group, version, ns, "dynamicconfigrenders")
        done = {i["metadata"]["name"] for i in listed["items"] if ready(i)}
        stream = watch.Watch()
        for event in stream.stream(
            custom.list_namespaced_custom_object,
            group,
            version,
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
                    group, version, ns, "dynamicconfigrenders"
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
                    group, version, ns, "dynamicconfigrenders"
                )["items"]
            },
        }
        writes = sum(1 for name, rv in after.items() if before.get(name) != rv)
        print(
            json.dumps(
                {
                    "renders": count,
                    "cold_start_to_all_ready_seconds": round(cold, 1),
                    "steady_state_writes_per_interval": writes,
                    "operator_rss_mib": round(rss / 1024, 1),
                }
            )
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        core.delete_namespace(ns)


if __name__ == "__main__":
    main()
