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
- ``NODE_REGISTRATION``: the ``nodeAgent.registration`` every chart install on the node carries.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

from kubernetes import client  # type: ignore[import-untyped]
from kubernetes.stream import stream  # type: ignore[import-untyped]

from tests.testenv.test_node import BUSYBOX

AGENT = "dynamic-config-agent"
"""The injected agent's container name (the contract's)."""

NODE_REGISTRATION: Final = "builtin"
"""``nodeAgent.registration`` of every chart the legs install or render onto the node. No
registry here serves upstream's node-driver-registrar image, so the chart's default
(``registrar``) would leave the node agent's pod in ImagePullBackOff; the node agent registers
itself with the kubelet instead. ``install_chart`` and ``render_component`` set it, under the
caller's values."""


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
