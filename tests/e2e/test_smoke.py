"""Leg 1 of the end-to-end ladder (issue 15), first part: an injected pod really runs.

The webhook is the real server (uvicorn + the admission app, in this process, as the webhook
tests run it) registered with the node's apiserver; the pod is the book's annotated pod shape
(mode both, file-mode 0640, the agent run as 1000/1000) with the agent image built here, reading
from the Consul test server, which the pod reaches through a pipe into the node's namespace.
Everything is asserted on the running pod: the app container reads the file, ``stat`` inside it,
the agent's security settings from the OCI spec containerd gave runc, restart counts.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.stream import stream  # type: ignore[import-untyped]

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook.settings import WebhookSettings
from tests.fixtures.kube import REPO
from tests.fixtures.node import KubeNode, ProjectImage
from tests.testenv.test_node import BUSYBOX, new_namespace

pytestmark = pytest.mark.e2e

AGENT = "dynamic-config-agent"


def _webhook_support() -> Any:
    """The webhook tests' ``RunningWebhook`` (their conftest is not importable by name)."""
    path = REPO / "packages" / "dynconf-k8s" / "tests" / "webhook" / "conftest.py"
    spec = importlib.util.spec_from_file_location("dynconf_e2e_webhook_support", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exec_in(core: Any, namespace: str, pod: str, container: str, *command: str) -> str:
    out: str = stream(
        core.connect_get_namespaced_pod_exec, pod, namespace, container=container,
        command=list(command), stderr=True, stdout=True, stdin=False, tty=False,
    )  # fmt: skip
    return out


def statuses(pod: Any) -> dict[str, Any]:
    every = [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])]
    return {s.name: s for s in every}


def wait_ready(core: Any, namespace: str, name: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
        if pod.status.phase == "Running" and ready:
            return pod
        assert pod.status.phase not in ("Failed", "Succeeded"), pod.status
        if time.monotonic() > deadline:
            events = core.list_namespaced_event(namespace).items
            raise AssertionError(
                f"pod {name} not Ready after {timeout} s: {pod.status}\n"
                + "\n".join(f"{e.reason}: {e.message}" for e in events)
            )
        time.sleep(0.2)


@pytest.fixture(scope="module")
def injected_pod(
    kube_node: KubeNode,
    kube_node_client: object,
    node_image: ProjectImage,
    consul_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Any, str, Any, float]]:
    """The annotated pod, Ready; yields (core api, namespace, pod, seconds to Ready)."""
    node_image("agent")
    support = _webhook_support()
    hook = support.RunningWebhook(
        WebhookSettings(installation=parse_installation({})), tmp_path_factory.mktemp("hook")
    )
    core = client.CoreV1Api(kube_node_client)
    admission = client.AdmissionregistrationV1Api(kube_node_client)
    label = uuid.uuid4().hex[:8]
    namespace = new_namespace(core)
    core.patch_namespace(namespace, {"metadata": {"labels": {"dynconf-e2e": label}}})
    registration = f"e2e-{label}.dynamic-config.rs"
    admission.create_mutating_webhook_configuration({
        "metadata": {"name": registration},
        "webhooks": [{
            "name": "inject.dynamic-config.rs",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
            "timeoutSeconds": 5,
            "clientConfig": {
                "url": f"{hook.url}/mutate",
                "caBundle": base64.b64encode(Path(hook.ca).read_bytes()).decode(),
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"dynconf-e2e": label}},
        }],
    })  # fmt: skip
    key = f"e2e-{label}/config.json"
    consul_server.client.kv.put(key, json.dumps({"port": 9000, "name": "smoke"}))
    with kube_node.expose(consul_server.port) as endpoint:
        annotations = {
            "dynamic-config.rs/inject": "true",
            "dynamic-config.rs/source": "consul",
            "dynamic-config.rs/endpoint": f"http://{endpoint}",
            "dynamic-config.rs/key": key,
            "dynamic-config.rs/path": "/config/rendered.toml",
            "dynamic-config.rs/mode": "both",
            "dynamic-config.rs/file-mode": "0640",
            "dynamic-config.rs/agent-run-as-user": "1000",
            "dynamic-config.rs/agent-run-as-group": "1000",
        }
        body = {
            "metadata": {"name": "smoke", "annotations": annotations},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
                "containers": [{
                    "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "cat /config/rendered.toml; exec sleep 3600"],
                    "readinessProbe": {"exec": {"command": ["test", "-s", "/config/rendered.toml"]},
                                       "periodSeconds": 1},
                }],
            },
        }  # fmt: skip
        support.await_webhook_called(
            core, namespace, {"metadata": {"name": "probe", "annotations": annotations},
                              "spec": body["spec"]},
        )  # fmt: skip
        began = time.monotonic()
        core.create_namespaced_pod(namespace, body)
        pod = wait_ready(core, namespace, "smoke")
        took = time.monotonic() - began
        print(f"\ne2e smoke: injected pod Ready {took:.1f} s after create")
        yield core, namespace, pod, took
    admission.delete_mutating_webhook_configuration(registration)
    core.delete_namespace(namespace)
    hook.stop()


def test_app_container_reads_the_rendered_file(injected_pod: tuple[Any, str, Any, float]) -> None:
    core, namespace, _, _ = injected_pod

    text = exec_in(core, namespace, "smoke", "app", "cat", "/config/rendered.toml")

    assert "port = 9000" in text
    assert 'name = "smoke"' in text


def test_rendered_file_has_the_requested_mode_and_owner(
    injected_pod: tuple[Any, str, Any, float],
) -> None:
    core, namespace, _, _ = injected_pod

    out = exec_in(core, namespace, "smoke", "app", "stat", "-c", "%a %u %g",
                  "/config/rendered.toml")  # fmt: skip

    assert out.split() == ["640", "1000", "1000"]


def test_shared_volume_is_memory_backed(injected_pod: tuple[Any, str, Any, float]) -> None:
    core, namespace, _, _ = injected_pod

    mounts = exec_in(core, namespace, "smoke", "app", "grep", " /config ", "/proc/mounts")

    assert mounts.split()[2] == "tmpfs"


def test_agent_runs_restricted_with_a_read_only_root(
    injected_pod: tuple[Any, str, Any, float], kube_node: KubeNode
) -> None:
    core, namespace, _, _ = injected_pod
    pod = core.read_namespaced_pod("smoke", namespace)
    agents = [s for name, s in statuses(pod).items() if name.startswith(AGENT) and s.container_id]

    specs = [kube_node.container_spec(s.container_id.split("//", 1)[1]) for s in agents]

    assert specs
    for spec in specs:
        process = spec["process"]
        assert (process["user"]["uid"], process["user"]["gid"]) == (1000, 1000)
        assert spec["root"].get("readonly") is True
        assert process.get("noNewPrivileges") is True
        assert process["capabilities"].get("effective", []) == []
        assert spec["linux"].get("seccomp") is not None


def test_no_container_restarted(injected_pod: tuple[Any, str, Any, float]) -> None:
    core, namespace, _, _ = injected_pod
    time.sleep(3)  # a crash-looping sidecar shows within the kubelet's first back-off

    pod = core.read_namespaced_pod("smoke", namespace)

    assert {n: s.restart_count for n, s in statuses(pod).items()} == dict.fromkeys(statuses(pod), 0)
