"""The kubelet node (``scripts/testenv start node``) runs real pods, and ``stop`` leaves nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.stream import stream  # type: ignore[import-untyped]

from tests.fixtures.kube import REPO, KubeControlPlane, _read_env
from tests.fixtures.node import KubeNode, ProjectImage

sys.path.insert(0, str(REPO / "scripts"))
from testenv_lib.common import system_tool

pytestmark = pytest.mark.e2e

BUSYBOX = "dynconf.local/busybox:1.35"


def wait_running(core: Any, namespace: str, name: str, timeout: float = 120) -> Any:
    """The pod once Running (fails fast if it Failed); returns it."""
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        if pod.status.phase == "Running":
            return pod
        assert pod.status.phase not in ("Failed", "Succeeded"), pod.status
        assert time.monotonic() < deadline, f"pod {name} not Running: {pod.status}"
        time.sleep(0.2)


def new_namespace(core: Any) -> str:
    """A fresh namespace, with its ``default`` ServiceAccount (admission requires it)."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    deadline = time.monotonic() + 30
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            return name
        except client.ApiException:
            assert time.monotonic() < deadline, f"no default ServiceAccount in {name}"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def shell_pod(kube_node_client: object) -> Iterator[tuple[Any, str, float]]:
    """A busybox pod left to the scheduler (no nodeName); yields (core, namespace, seconds)."""
    core = client.CoreV1Api(kube_node_client)
    namespace = new_namespace(core)
    began = time.monotonic()
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "shell"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "sh",
                        "image": BUSYBOX,
                        "imagePullPolicy": "Never",
                        "command": ["sh", "-c", "echo started; exec sleep 3600"],
                    }
                ],
            },
        },
    )
    wait_running(core, namespace, "shell")
    took = time.monotonic() - began
    print(f"\nnode: busybox pod Running {took:.1f} s after create")
    yield core, namespace, took
    core.delete_namespace(namespace)


def test_scheduler_places_a_pod_on_the_node(
    shell_pod: tuple[Any, str, float], kube_node: KubeNode
) -> None:
    core, namespace, _ = shell_pod

    pod = core.read_namespaced_pod("shell", namespace)

    assert pod.spec.node_name == kube_node.name
    assert pod.status.pod_ip.startswith("10.88.0.")


def test_pod_gets_a_projected_service_account_token(shell_pod: tuple[Any, str, float]) -> None:
    core, namespace, _ = shell_pod

    out = stream(
        core.connect_get_namespaced_pod_exec, "shell", namespace,
        command=["ls", "/var/run/secrets/kubernetes.io/serviceaccount"],
        stderr=True, stdout=True, stdin=False, tty=False,
    )  # fmt: skip

    assert out.split() == ["ca.crt", "namespace", "token"]


IN_CLUSTER_CLIENT = """
import json, os, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
request = urllib.request.Request(
    f"https://{host}:{port}/api",
    headers={"Authorization": "Bearer " + open(sa + "token").read()},
)
context = ssl.create_default_context(cafile=sa + "ca.crt")
print(json.load(urllib.request.urlopen(request, context=context, timeout=10))["kind"])
"""
"""What every in-cluster client does: the Service's environment variables, the projected token,
the mounted CA (which must verify the serving certificate at that address)."""


def test_pod_reaches_the_apiserver_at_the_kubernetes_service_with_its_token(
    shell_pod: tuple[Any, str, float], node_image: ProjectImage
) -> None:
    """``/api`` is discovery, which anonymous requests may not read: ``APIVersions`` back means
    the ClusterIP is routed, the certificate verified and the projected token authenticated."""
    core, namespace, _ = shell_pod
    image = node_image("agent").name  # Python; busybox's TLS cannot talk to Go's
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": "in-cluster"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "client", "image": image, "imagePullPolicy": "Never",
            "command": ["python3", "-c", IN_CLUSTER_CLIENT]}]},
    })  # fmt: skip
    deadline = time.monotonic() + 60
    while (phase := core.read_namespaced_pod("in-cluster", namespace).status.phase) not in (
        "Succeeded",
        "Failed",
    ):
        assert time.monotonic() < deadline, f"in-cluster client still {phase}"
        time.sleep(0.3)

    log = core.read_namespaced_pod_log("in-cluster", namespace, _preload_content=False).data

    assert (phase, log) == ("Succeeded", b"APIVersions\n"), log.decode(errors="replace")


def test_apiserver_fetches_container_logs_from_the_kubelet(
    shell_pod: tuple[Any, str, float],
) -> None:
    core, namespace, _ = shell_pod

    log = core.read_namespaced_pod_log("shell", namespace, _preload_content=False).data

    assert log == b"started\n"


def test_apiserver_reaches_a_service_backed_by_a_pod(shell_pod: tuple[Any, str, float]) -> None:
    core, namespace, _ = shell_pod
    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "httpd", "image": BUSYBOX, "imagePullPolicy": "Never",
            "command": ["sh", "-c", "mkdir /www; echo served-by-pod > /www/index.html; "
                                    "exec httpd -f -p 8080 -h /www"]}]},
    })  # fmt: skip
    core.create_namespaced_service(namespace, {
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 8080, "targetPort": 8080}]},
    })  # fmt: skip
    wait_running(core, namespace, "web")
    deadline = time.monotonic() + 30
    while True:
        try:
            body = core.connect_get_namespaced_service_proxy_with_path(
                "web:8080", namespace, "index.html", _preload_content=False
            ).data
            break
        except client.ApiException:  # until the EndpointSlice names the pod
            assert time.monotonic() < deadline
            time.sleep(0.3)

    assert body == b"served-by-pod\n"


# ---------------------------------------------------------------------------- stop
def _host_state() -> dict[str, Any]:
    links = subprocess.run(
        [system_tool("ip"), "-o", "link"], capture_output=True, text=True, check=True
    )
    return {
        "links": sorted(line.split(":")[1].strip() for line in links.stdout.splitlines()),
        "sysctls": {
            k: Path(f"/proc/sys/{k}").read_text()
            for k in ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
        },
    }


def _pids_in_netns(netns: str, among: Iterable[int] | None = None) -> list[int]:
    """Processes in ``netns`` (``net:[inode]``), optionally only those of ``among``.

    The kernel reuses a freed namespace's inode number, so after a stop a new namespace (another
    checkout's node, started meanwhile) can carry the same name: ask about the pids that were
    inside before the stop, not about whoever holds the number now.
    """
    found = []
    candidates = (
        [Path(f"/proc/{pid}") for pid in among] if among is not None else Path("/proc").iterdir()
    )
    for proc in candidates:
        if proc.name.isdigit():
            try:
                if os.readlink(proc / "ns" / "net") == netns:
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _pids_naming(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def test_stop_leaves_no_process_mount_cgroup_or_link(tmp_path: Path) -> None:
    """A node of its own (separate run dir, so it can run beside the session's), with a pod."""
    if os.geteuid() != 0:
        pytest.skip("the kubelet node needs root")
    run = tmp_path / "run"
    env = {**os.environ, "DYNCONF_TESTENV_RUN": str(run)}
    testenv = [sys.executable, str(REPO / "scripts" / "testenv")]
    before = _host_state()
    began = time.monotonic()
    started = subprocess.run([*testenv, "start", "node"], env=env, capture_output=True,
                             text=True, timeout=300, check=False)  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        print(f"\nnode: started in {time.monotonic() - began:.1f} s")
        node = KubeNode.from_env(_read_env(run / "published" / "node.env"))
        netns = os.readlink(f"/proc/{node.holder_pid}/ns/net")
        cgroup = node.cgroup_root()
        plane: KubeControlPlane = node.plane
        from kubernetes import config

        configuration = client.Configuration()
        config.load_kube_config(str(plane.kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            core = client.CoreV1Api(api)
            namespace = new_namespace(core)
            core.create_namespaced_pod(namespace, {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "left"},
                "spec": {"containers": [{"name": "sh", "image": BUSYBOX,
                                         "imagePullPolicy": "Never",
                                         "command": ["sleep", "3600"]}]},
            })  # fmt: skip
            wait_running(core, namespace, "left")
            inside = _pids_in_netns(netns)
    finally:
        stopped = subprocess.run([*testenv, "stop"], env=env, capture_output=True, text=True,
                                 timeout=120, check=False)  # fmt: skip

    assert stopped.returncode == 0, stopped.stderr
    assert inside, "the node's namespace held no process"
    assert _pids_in_netns(netns, among=inside) == []
    assert _pids_naming(str(run)) == []
    assert str(run) not in Path("/proc/self/mountinfo").read_text()
    assert sorted(Path("/sys/fs/cgroup").glob(f"*/{cgroup}")) == []
    assert _host_state() == before
