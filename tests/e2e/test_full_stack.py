"""Leg 3 of the end-to-end ladder (issue 15): the book's "full stack, one Deployment" as
manifests on the node.

Vault is the OpenBao test server behind a TLS front whose certificate names the node address
(the seed reaches Vault over https with ``ca-configmap: vault-ca``), with kubernetes auth: the
agent logs in with the pod's own service-account token, which OpenBao reviews with the node's
apiserver.  The template ConfigMap is the seed's, verbatim; the Deployment is the seed's
(3 replicas, ``native-sidecar: "true"``) with ``watch-seconds`` 5 instead of 30 to keep the leg
short.  The app is the agent image's own python running a script from a ConfigMap: it watches
``/config/rendered.yaml`` with ``DynamicConfig`` and serves ``/readyz`` with its generation,
which the test reads through the apiserver's pod proxy (no exec).  Then: a ``kv put`` moves
every replica's generation within watch-seconds with no restart, and a Job with the same
annotations completes (its agent is a native sidecar, so it does not hold the Job open).
"""

from __future__ import annotations

import contextlib
import json
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.stores_support import (
    Workspace,
    annotations,
    load_conftest,
    serving_pair,
    vault_kubernetes_auth,
    workspace,
)
from tests.e2e.test_smoke import exec_in, statuses
from tests.fixtures.node import KubeNode, ProjectImage

pytestmark = pytest.mark.e2e

__all__ = ["workspace"]  # fixtures, used by name

_git_support = load_conftest("packages/dynconf-store-git/tests/conftest.py", "dynconf_e2e_git")

WATCH_SECONDS = 5
SECRET = "myapp"
TEMPLATE = """\
db:
  host: {{ db.host }}
  pool_size: {{ db.pool_size | default(8) }}
features:
  cache: {{ features.cache | default(false) }}
"""
"""The seed's template, verbatim."""

APP = """\
import http.server
import json
import time

from pydantic import BaseModel

from dynconf import DynamicConfig


class Db(BaseModel):
    host: str
    pool_size: int


config = DynamicConfig(Db, "db").file("/config/rendered.yaml")
config.init()
changed_at = [time.time()]
config.on_reload(lambda old, new: changed_at.__setitem__(0, time.time()))
config.watch()


class Readyz(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/readyz":
            self.send_error(404)
            return
        db = config.current()
        body = json.dumps({"generation": config.generation, "host": db.host,
                           "pool_size": db.pool_size, "changed_at": changed_at[0]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("", 8080), Readyz).serve_forever()
"""
"""The app: ``DynamicConfig`` watching the rendered file, ``/readyz`` with its generation."""

JOB = """\
import yaml
with open("/config/rendered.yaml") as handle:
    db = yaml.safe_load(handle)["db"]
assert db["host"], db
print("job read", db["host"], db["pool_size"])
"""


@dataclass
class Stack:
    ws: Workspace
    vault: Any
    image: str
    pod_annotations: dict[str, str]

    def replicas(self) -> list[str]:
        pods = self.ws.core.list_namespaced_pod(self.ws.namespace, label_selector="app=billing")
        return sorted(p.metadata.name for p in pods.items if p.metadata.deletion_timestamp is None)

    def readyz(self, pod: str) -> dict[str, Any]:
        """``/readyz`` of one replica, through the apiserver's pod proxy."""
        response = self.ws.core.connect_get_namespaced_pod_proxy_with_path(
            f"{pod}:8080", self.ws.namespace, "readyz", _preload_content=False
        )
        answer: dict[str, Any] = json.loads(response.data)
        return answer

    def put(self, db: dict[str, Any]) -> None:
        self.vault.client.secrets.kv.v2.create_or_update_secret(
            SECRET, secret={"db": db, "features": {"cache": True}}
        )


@pytest.fixture(scope="module")
def stack(
    workspace: Workspace,
    kube_node: KubeNode,
    kube_node_client: object,
    node_image: ProjectImage,
    vault_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """The seed's pieces applied in its order: Vault auth, the CA, the template, the app."""
    ws = workspace
    with contextlib.ExitStack() as cleanup:
        ws.service_account("billing")
        mount = vault_kubernetes_auth(
            vault_server, kube_node, kube_node_client, ws.namespace, cleanup,
            role="billing", account="billing", path=SECRET,
        )  # fmt: skip
        pair = serving_pair(tmp_path_factory.mktemp("vault-tls"), kube_node.ip)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pair.cert, pair.key)
        upstream = urlsplit(vault_server.addr).port
        assert upstream
        front = _git_support.TlsFront(_git_support.free_port(), upstream, context)
        front.start()
        cleanup.callback(front.stop)
        endpoint = cleanup.enter_context(kube_node.expose(front.port))
        ws.config_map("vault-ca", {"ca.crt": pair.ca.read_text()})
        ws.config_map("billing-template", {"template": TEMPLATE})
        ws.config_map("billing-app", {"app.py": APP, "job.py": JOB})
        s = Stack(ws, vault_server, node_image("agent").name, {})
        s.put({"host": "db-1.internal", "pool_size": 8})
        s.pod_annotations = annotations(
            inject="true", source="vault", endpoint=f"https://{endpoint}", key=f"secret/{SECRET}",
            auth="kubernetes", auth_role="billing", auth_mount=mount, ca_configmap="vault-ca",
            template_configmap="billing-template", path="/config/rendered.yaml",
            native_sidecar="true", watch_seconds=str(WATCH_SECONDS),
        )  # fmt: skip
        began = time.monotonic()
        client.AppsV1Api(ws.core.api_client).create_namespaced_deployment(
            ws.namespace, deployment(s)
        )
        _await_rollout(s, 3)
        print(f"\ne2e full stack: 3 replicas Ready {time.monotonic() - began:.1f} s after apply")
        yield s


def pod_spec(s: Stack, command: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "serviceAccountName": "billing",
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "app", "image": s.image, "imagePullPolicy": "Never", "command": command,
            "volumeMounts": [{"name": "app", "mountPath": "/app", "readOnly": True}],
            **extra,
        }],
        "volumes": [{"name": "app", "configMap": {"name": "billing-app"}}],
    }  # fmt: skip


def deployment(s: Stack) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 1,
             "timeoutSeconds": 10}  # fmt: skip
    return {
        "metadata": {"name": "billing"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "billing"}},
            "template": {
                "metadata": {"labels": {"app": "billing"}, "annotations": s.pod_annotations},
                "spec": pod_spec(s, ["python3", "/app/app.py"], readinessProbe=probe),
            },
        },
    }


def _await_rollout(s: Stack, replicas: int, timeout: float = 240) -> None:
    apps = client.AppsV1Api(s.ws.core.api_client)
    deadline = time.monotonic() + timeout
    while True:
        status = apps.read_namespaced_deployment("billing", s.ws.namespace).status
        if (status.ready_replicas or 0) == replicas:
            return
        if time.monotonic() > deadline:
            names = s.replicas()
            # the first unready replica's own account of itself (events, logs)
            for name in names:
                s.ws.wait_ready(name, timeout=1)
            raise AssertionError(f"billing: {status.ready_replicas} of {replicas} Ready: {names}")
        time.sleep(0.5)


def test_every_replica_serves_the_rendered_document(stack: Stack) -> None:
    answers = {pod: stack.readyz(pod) for pod in stack.replicas()}

    assert len(answers) == 3
    assert {(a["host"], a["pool_size"]) for a in answers.values()} == {("db-1.internal", 8)}


def test_rendered_file_is_the_template_applied(stack: Stack) -> None:
    pod = stack.replicas()[0]

    # the app runs the agent image, which has python but no cat
    text = exec_in(stack.ws.core, stack.ws.namespace, pod, "app", "python3", "-c",
                   "print(open('/config/rendered.yaml').read(), end='')")  # fmt: skip

    assert text.splitlines() == [
        "db:", "  host: db-1.internal", "  pool_size: 8", "features:", "  cache: true",
    ]  # fmt: skip


def test_agent_is_a_native_sidecar(stack: Stack) -> None:
    pod = stack.ws.core.read_namespaced_pod(stack.replicas()[0], stack.ws.namespace)

    sidecars = [c for c in pod.spec.init_containers or [] if c.restart_policy == "Always"]

    assert [c.name for c in sidecars] == ["dynamic-config-agent"]


def test_kv_put_moves_every_replica_within_watch_seconds(stack: Stack) -> None:
    pods = stack.replicas()
    before = {pod: stack.readyz(pod)["generation"] for pod in pods}
    put_at = time.time()
    stack.put({"host": "db-2.internal", "pool_size": 16})
    began = time.monotonic()

    # when each app installed the change, by its own clock (the node's, which is this
    # machine's): the test's polling through the apiserver proxy adds nothing to the figure
    moved: dict[str, float] = {}
    while len(moved) < len(pods) and time.monotonic() - began < WATCH_SECONDS + 30:
        for pod in set(pods) - set(moved):
            answer = stack.readyz(pod)
            if answer["generation"] > before[pod] and answer["host"] == "db-2.internal":
                moved[pod] = answer["changed_at"] - put_at
        time.sleep(0.1)
    shown = ", ".join(f"{t:.1f}" for t in sorted(moved.values()))
    print(f"\ne2e full stack: kv put → every replica's generation moved after {shown} s")
    # the rendered file's mtime splits each figure into the agent's part and the app's
    for pod in sorted(moved):
        written = float(exec_in(stack.ws.core, stack.ws.namespace, pod, "app", "python3", "-c",
                                "import os; print(os.stat('/config/rendered.yaml').st_mtime)"))  # fmt: skip
        print(
            f"  {pod}: file written after {written - put_at:.2f} s, "
            f"app installed {moved[pod] - (written - put_at):.2f} s later"
        )

    slowest = max(moved, key=moved.__getitem__)
    if moved[slowest] > WATCH_SECONDS + 2:  # the agent's own account of the slow replica
        print(stack.ws.core.read_namespaced_pod_log(
            slowest, stack.ws.namespace, container="dynamic-config-agent", tail_lines=40,
            _preload_content=False).data.decode())  # fmt: skip
    assert sorted(moved) == pods
    # a poll every watch-seconds, then the agent's render and the app's file watch
    assert max(moved.values()) <= WATCH_SECONDS + 2
    assert {stack.readyz(pod)["pool_size"] for pod in pods} == {16}


def test_no_pod_restarted(stack: Stack) -> None:
    restarts = {
        (pod, name): status.restart_count
        for pod in stack.replicas()
        for name, status in statuses(
            stack.ws.core.read_namespaced_pod(pod, stack.ws.namespace)
        ).items()
    }

    assert restarts == dict.fromkeys(restarts, 0)


def test_job_with_the_same_annotations_completes(stack: Stack) -> None:
    batch = client.BatchV1Api(stack.ws.core.api_client)
    spec = pod_spec(stack, ["python3", "/app/job.py"])
    spec["restartPolicy"] = "Never"
    began = time.monotonic()
    batch.create_namespaced_job(stack.ws.namespace, {
        "metadata": {"name": "billing-migrate"},
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"annotations": stack.pod_annotations}, "spec": spec,
        }},
    })  # fmt: skip

    deadline = time.monotonic() + 180
    while True:
        status = batch.read_namespaced_job("billing-migrate", stack.ws.namespace).status
        if status.succeeded or status.failed or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    print(f"\ne2e full stack: the Job completed {time.monotonic() - began:.1f} s after create")

    assert (status.succeeded, status.failed) == (1, None), _job_account(stack, "billing-migrate")


def _job_account(stack: Stack, job: str) -> str:
    """The Job's pods, their container states and logs, for a failure's message."""
    lines = []
    pods = stack.ws.core.list_namespaced_pod(stack.ws.namespace, label_selector=f"job-name={job}")
    for pod in pods.items:
        for name, status in statuses(pod).items():
            lines.append(f"--- {pod.metadata.name}/{name}: {status.state}")
            with contextlib.suppress(client.ApiException):
                lines.append(stack.ws.log(pod.metadata.name, name)[-1500:])
    return "\n".join(lines)
