"""What every leg of the end-to-end ladder needs to look at a running pod (issue 15).

Shared by the legs (import them by these names; they are the stable API):

- ``exec_in(core, namespace, pod, container, *command)``: a command's output inside a container;
- ``statuses(pod)``: every container status (init + regular) by name;
- ``wait_ready(core, namespace, name)``: the pod once Running and Ready, or an assertion with
  its events and the logs of the containers that restarted or are not ready;
- ``app_environment(core, namespace, pod)``: the ``app`` process's environment, read from
  ``/proc/1/environ`` inside its container;
- ``Injector``: a namespace a webhook injects into plus a Consul server its pods reach, with the
  book's annotated pod (``annotations``) and a busybox ``app`` pod runner (``run``);
- ``in_process_webhook(...)``: the real webhook running in the test process, registered with the
  node's apiserver by URL for one labelled namespace, yielding an ``Injector`` (the chart-free
  way; the chart's own release is ``tests/e2e/conftest.py``).
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.stream import stream  # type: ignore[import-untyped]

from tests.fixtures.kube import REPO, await_webhook_called
from tests.fixtures.node import KubeNode
from tests.testenv.test_node import BUSYBOX, new_namespace

AGENT = "dynamic-config-agent"
"""The injected agent's container name (the contract's)."""


def exec_in(core: Any, namespace: str, pod: str, container: str, *command: str) -> str:
    """``command``'s stdout and stderr, run inside ``container`` of ``pod``."""
    out: str = stream(
        core.connect_get_namespaced_pod_exec, pod, namespace, container=container,
        command=list(command), stderr=True, stdout=True, stdin=False, tty=False,
    )  # fmt: skip
    return out


def statuses(pod: Any) -> dict[str, Any]:
    """Every container status of ``pod`` (init containers included), by container name."""
    every = [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])]
    return {s.name: s for s in every}


def describe(core: Any, namespace: str, name: str) -> str:
    """The pod's events and the logs of its containers that restarted or are not ready."""
    pod = core.read_namespaced_pod(name, namespace)
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    logs = []
    for container, status in statuses(pod).items():
        if status.restart_count or not status.ready:
            try:
                text = core.read_namespaced_pod_log(
                    name,
                    namespace,
                    container=container,
                    previous=bool(status.restart_count),
                    _preload_content=False,
                ).data.decode(errors="replace")
            except client.ApiException as err:
                text = f"(no log: {err.status})"
            logs.append(f"--- {container} ---\n{text[-2000:]}")
    return (
        f"{pod.status.phase}\n"
        + "\n".join(f"{e.reason}: {e.message}" for e in events.items)
        + "\n"
        + "\n".join(logs)
    )


def wait_ready(core: Any, namespace: str, name: str, timeout: float = 120) -> Any:
    """The pod once Running and Ready; fails fast when it ended, with its story on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
        if pod.status.phase == "Running" and ready:
            return pod
        assert pod.status.phase not in ("Failed", "Succeeded"), pod.status
        if time.monotonic() > deadline:
            raise AssertionError(
                f"pod {name} not Ready after {timeout} s: {describe(core, namespace, name)}"
            )
        time.sleep(0.2)


def app_environment(core: Any, namespace: str, pod: str) -> dict[str, str]:
    """The app process's environment, read from ``/proc/1/environ`` inside its container."""
    raw = exec_in(core, namespace, pod, "app", "cat", "/proc/1/environ")
    return dict(line.split("=", 1) for line in raw.split("\0") if "=" in line)


class Injector:
    """A namespace a webhook injects into, with Consul reachable by its pods."""

    def __init__(self, core: Any, namespace: str, endpoint: str, consul: Any, label: str) -> None:
        self.core, self.namespace, self.endpoint, self.consul = core, namespace, endpoint, consul
        self.label = label

    def annotations(self, key: str, **extra: str) -> dict[str, str]:
        """The book's annotated pod (mode both, file-mode 0640, agent as 1000/1000) + ``extra``."""
        base = {
            "inject": "true",
            "source": "consul",
            "endpoint": f"http://{self.endpoint}",
            "key": key,
            "path": "/config/rendered.toml",
            "mode": "both",
            "file-mode": "0640",
            "agent-run-as-user": "1000",
            "agent-run-as-group": "1000",
            **extra,
        }
        return {f"dynamic-config.rs/{k}": v for k, v in base.items()}

    def put(self, key: str, document: dict[str, Any]) -> None:
        self.consul.client.kv.put(key, json.dumps(document))

    def pod(self, name: str, annotations: dict[str, str], command: str, ready_file: str) -> Any:
        """The body of a pod with one busybox ``app`` container, Ready once ``ready_file`` is."""
        return {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
                "containers": [{
                    "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", command],
                    "readinessProbe": {"exec": {"command": ["test", "-s", ready_file]},
                                       "periodSeconds": 1},
                }],
            },
        }  # fmt: skip

    def run(self, name: str, annotations: dict[str, str], command: str, ready_file: str) -> float:
        """Create the ``pod`` and wait for it to be Ready; returns seconds until Ready."""
        began = time.monotonic()
        self.core.create_namespaced_pod(
            self.namespace, self.pod(name, annotations, command, ready_file)
        )
        wait_ready(self.core, self.namespace, name)
        return time.monotonic() - began


def _webhook_support() -> Any:
    """The webhook tests' ``RunningWebhook`` (their conftest is not importable by name)."""
    path = REPO / "packages" / "dynconf-k8s" / "tests" / "webhook" / "conftest.py"
    spec = importlib.util.spec_from_file_location("dynconf_e2e_webhook_support", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def in_process_webhook(
    kube_node: KubeNode, api_client: object, consul: Any, workdir: Path
) -> Iterator[Injector]:
    """The real webhook in this process, registered by URL for one fresh labelled namespace."""
    from dynconf_k8s.contract import parse_installation
    from dynconf_k8s.webhook.settings import WebhookSettings

    support = _webhook_support()
    hook = support.RunningWebhook(WebhookSettings(installation=parse_installation({})), workdir)
    core = client.CoreV1Api(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
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
    try:
        with kube_node.expose(consul.port) as endpoint:
            injection = Injector(core, namespace, endpoint, consul, label)
            probe = {
                "metadata": {"name": "probe", "annotations": injection.annotations("probe")},
                "spec": {"containers": [{"name": "app", "image": BUSYBOX}]},
            }
            await_webhook_called(core, namespace, probe)
            yield injection
    finally:
        admission.delete_mutating_webhook_configuration(registration)
        core.delete_namespace(namespace)
        hook.stop()
