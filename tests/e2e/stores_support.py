"""What the store, full-stack and latency legs share: a namespace the chart's webhook injects
into, pods in it, and reading files inside their app containers.

The webhook is the chart's own release (``chart_release``, ``tests/e2e/conftest.py``): its
image, its default installation and resource defaults, its Service and registration, exactly
what a user installs; ``workspace`` asks it for a namespace it injects into.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.conftest import Release
from tests.e2e.test_smoke import exec_in, statuses, wait_ready
from tests.fixtures.kube import REPO
from tests.fixtures.node import KubeNode
from tests.testenv.test_node import BUSYBOX

AGENT_PREFIX = "dynamic-config-"
"""Every container the webhook adds is named ``dynamic-config-…`` (agent, init, env wrapper)."""
ANNOTATION = "dynamic-config.rs/"


def load_conftest(relative: str, name: str) -> ModuleType:
    """A package's test ``conftest.py`` as a module (conftests are not importable by name)."""
    if name in sys.modules:
        return sys.modules[name]
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def annotations(**values: str) -> dict[str, str]:
    """``dynamic-config.rs/<key>`` for every keyword (``_`` in a keyword stands for ``-``)."""
    return {ANNOTATION + key.replace("_", "-"): value for key, value in values.items()}


# ---------------------------------------------------------------------------- the namespace
@dataclass
class Workspace:
    """One enrolled namespace and the objects a leg makes in it."""

    core: Any
    namespace: str

    def secret(self, name: str, data: dict[str, str], kind: str = "Opaque") -> None:
        self.core.create_namespaced_secret(self.namespace, {
            "metadata": {"name": name}, "type": kind, "stringData": data,
        })  # fmt: skip

    def config_map(self, name: str, data: dict[str, str]) -> None:
        self.core.create_namespaced_config_map(self.namespace, {
            "metadata": {"name": name}, "data": data,
        })  # fmt: skip

    def service_account(self, name: str) -> None:
        self.core.create_namespaced_service_account(self.namespace, {"metadata": {"name": name}})

    def create_pod(
        self,
        name: str,
        pod_annotations: dict[str, str],
        *,
        ready_file: str,
        command: str = "exec sleep 3600",
        service_account: str | None = None,
        security_context: dict[str, Any] | None = None,
    ) -> None:
        """A pod with one busybox ``app`` container, Ready once ``ready_file`` is not empty."""
        spec: dict[str, Any] = {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                "command": ["sh", "-c", command],
                # a generous timeout: an exec probe is a runc exec, slow on a loaded machine
                "readinessProbe": {"exec": {"command": ["test", "-s", ready_file]},
                                   "periodSeconds": 1, "timeoutSeconds": 10},
            }],
        }  # fmt: skip
        if service_account:
            spec["serviceAccountName"] = service_account
        if security_context:
            spec["securityContext"] = security_context
        body = {"metadata": {"name": name, "annotations": pod_annotations}, "spec": spec}
        self.core.create_namespaced_pod(self.namespace, body)

    def wait_ready(self, name: str, timeout: float = 180) -> Any:
        return wait_ready(self.core, self.namespace, name, timeout)

    def read(self, pod: str, path: str, container: str = "app") -> str:
        """``cat path`` inside the pod's container."""
        return exec_in(self.core, self.namespace, pod, container, "cat", path)

    def wait_for(
        self, pod: str, path: str, accept: Callable[[str], bool], timeout: float = 60
    ) -> tuple[str, float]:
        """Poll the file inside the app container until ``accept``; (text, seconds it took)."""
        began = time.monotonic()
        deadline = began + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.read(pod, path)
            if accept(text):
                return text, time.monotonic() - began
            time.sleep(0.2)
        raise AssertionError(f"{pod}: {path} did not change in {timeout} s; it reads:\n{text}")

    def inspect(self, pod: str, directory: str = "/config") -> str:
        """``ls -ln`` of ``directory`` in the app container, for a failure's message."""
        try:
            return exec_in(self.core, self.namespace, pod, "app", "ls", "-lna", directory)
        except Exception as err:  # a diagnostic must not hide the failure it explains
            return f"(exec failed: {type(err).__name__})"

    def restarts(self, pod: str) -> dict[str, int]:
        """``restartCount`` of every container of the pod (init, native sidecar, app)."""
        found = statuses(self.core.read_namespaced_pod(pod, self.namespace))
        return {name: status.restart_count for name, status in found.items()}

    def agent_terminations(self, pod: str) -> dict[str, str]:
        """The reason an injected container last terminated (``OOMKilled``, …), where it did."""
        out = {}
        for name, status in statuses(self.core.read_namespaced_pod(pod, self.namespace)).items():
            if not name.startswith(AGENT_PREFIX):
                continue
            for state in (status.state, status.last_state):
                terminated = state.terminated if state else None
                if terminated is not None and terminated.reason != "Completed":
                    out[name] = f"{terminated.reason} (exit {terminated.exit_code})"
        return out

    def log(self, pod: str, container: str, *, previous: bool = False) -> str:
        """The container's log (``previous``: its run before the last restart)."""
        text: str = self.core.read_namespaced_pod_log(
            pod, self.namespace, container=container, previous=previous, _preload_content=False
        ).data.decode(errors="replace")
        return text


@pytest.fixture(scope="module")
def workspace(chart_release: Release) -> Iterator[Workspace]:
    """A fresh namespace the chart's webhook injects into, deleted after the module."""
    namespace = chart_release.injecting_namespace()
    yield Workspace(chart_release.core, namespace)
    chart_release.core.delete_namespace(namespace)


def bind_auth_delegator(kube_node_client: object, namespace: str, account: str) -> str:
    """A token of ``namespace/account`` bound to ``system:auth-delegator`` (TokenReview caller).

    What a store server's own ServiceAccount holds when it reviews pods' tokens; the servers
    here run outside the node, so they get the token as a file instead of a mount.
    """
    core = client.CoreV1Api(kube_node_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    client.RbacAuthorizationV1Api(kube_node_client).create_cluster_role_binding({
        "metadata": {"name": f"{namespace}-{account}-reviewer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:auth-delegator"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    })  # fmt: skip
    request = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 7200}}
    )
    return str(request.status.token)


def unbind_auth_delegator(kube_node_client: object, namespace: str, account: str) -> None:
    client.RbacAuthorizationV1Api(kube_node_client).delete_cluster_role_binding(
        f"{namespace}-{account}-reviewer"
    )


@dataclass(frozen=True)
class ServingPair:
    """A CA and a server certificate it signed, as files."""

    ca: Path
    cert: Path
    key: Path


def serving_pair(directory: Path, *addresses: str) -> ServingPair:
    """A throwaway CA and a server certificate for ``addresses`` (IPs), e.g. the node IP.

    For the servers pods dial at ``10.88.0.1``, which the test servers' own certificates (made
    for 127.0.0.1 and localhost) do not name.
    """
    from tests.fixtures.certs import Authority

    root = Authority("dynconf e2e CA")
    leaf = root.issue("dynconf e2e server", addresses)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.pem").write_bytes(root.cert_pem())
    leaf.write(directory / "server.pem", directory / "server-key.pem")
    return ServingPair(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem")


def vault_kubernetes_auth(
    vault: Any,
    node: KubeNode,
    kube_client: object,
    namespace: str,
    stack: contextlib.ExitStack,
    *,
    role: str,
    account: str,
    path: str,
) -> str:
    """A kubernetes auth mount on the OpenBao test server whose ``role`` lets ``account`` (in
    ``namespace``) read ``secret/<path>``; returns the mount, removed when ``stack`` closes.

    The server reviews pods' tokens with the node's apiserver (it runs outside the node, so it
    reaches the apiserver on 127.0.0.1) using a reviewer bound to ``system:auth-delegator``.
    """
    label = uuid.uuid4().hex[:8]
    reviewer = bind_auth_delegator(kube_client, namespace, f"vault-reviewer-{label}")
    stack.callback(unbind_auth_delegator, kube_client, namespace, f"vault-reviewer-{label}")
    mount, bao = f"k8s-{label}", vault.client
    bao.sys.enable_auth_method("kubernetes", path=mount)
    stack.callback(bao.sys.disable_auth_method, mount)
    bao.write(
        f"auth/{mount}/config", kubernetes_host=node.plane.server,
        kubernetes_ca_cert=Path(node.plane.ca).read_text(), token_reviewer_jwt=reviewer,
    )  # fmt: skip
    bao.sys.create_or_update_policy(
        f"read-{label}", f'path "secret/data/{path}" {{ capabilities = ["read"] }}'
    )
    stack.callback(bao.sys.delete_policy, f"read-{label}")
    bao.write(
        f"auth/{mount}/role/{role}", bound_service_account_names=[account],
        bound_service_account_namespaces=[namespace], token_policies=[f"read-{label}"],
        token_ttl="1h",
    )  # fmt: skip
    return mount
