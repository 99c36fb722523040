"""The webhook rows of ``bench/peers.py``: ours beside the HashiCorp vault-k8s injector 1.6.2.

The peer is built into the bench cache (``~/.cache/dynconf-bench/vault-k8s-v1.6.2``) on first
use: the module proxy refuses ``go install`` of vault-k8s (403 on its version list), so the
module is fetched with ``go mod download`` and built with ``go build`` in its directory.

vault-k8s serves ``/mutate`` only after it has a Kubernetes client (``rest.InClusterConfig``,
which reads the token and CA from the fixed in-cluster path) and a synced informer on
MutatingWebhookConfigurations. It is pointed at the test API server of ``scripts/testenv``
(``kube``): a ServiceAccount allowed to list and watch those objects, a token minted for it,
and a private mount namespace (``unshare -m``, root) in which a temporary directory is bound
over ``/run``, so ``/var/run/secrets/kubernetes.io/serviceaccount`` holds that token for the
peer alone. It serves a static pair (``-tls-cert-file``/``-tls-key-file``) minted like ours;
no ``-tls-auto`` name, so it patches no webhook configuration. The objects are deleted after.

Both servers get :func:`webhook_https.review` of the same pod, each with the annotations that
make it inject (ours ``dynamic-config.rs/*``, the peer ``vault.hashicorp.com/agent-inject``,
a role and one secret), and each answer is checked to allow the pod with a JSON patch. The
loads are ``bench/webhook_https.py``'s: the open loop paced at 200/s on one keep-alive
connection (latency from the scheduled send, microseconds) and CONNECTIONS closed loops for
the sustained rate. The client is this Python process on the same two cores, so the sustained
row is what each server does beside a client that takes its share of them.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import webhook_https
from agent_latency import server_env

VAULT_K8S = ("github.com/hashicorp/vault-k8s", "v1.6.2")
ACCOUNT = "dynconf-bench-vault-k8s"
"""The ServiceAccount, ClusterRole and ClusterRoleBinding the peer runs as (deleted after)."""
PEER_ANNOTATIONS = {
    "vault.hashicorp.com/agent-inject": "true",
    "vault.hashicorp.com/role": "myapp",
    "vault.hashicorp.com/agent-inject-secret-config": "secret/data/myapp/config",
}
RBAC = f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {ACCOUNT}, namespace: default}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ACCOUNT}}}
rules:
- apiGroups: [admissionregistration.k8s.io]
  resources: [mutatingwebhookconfigurations]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ACCOUNT}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ACCOUNT}}}
subjects: [{{kind: ServiceAccount, name: {ACCOUNT}, namespace: default}}]
"""

PACED = "admission p99 at 200/s paced (webhook vs vault-k8s 1.6.2)"
PACED_P50 = "admission p50 at 200/s paced (webhook vs vault-k8s 1.6.2)"
SUSTAINED = "admission max sustained /s on 2 cores (higher is better; webhook vs vault-k8s)"


def vault_k8s(cache: Path, install: bool) -> tuple[Path | None, str]:
    """The injector binary in the cache, built on first use; or why there is none."""
    module, version = VAULT_K8S
    binary = cache / f"vault-k8s-{version}" / "bin" / "vault-k8s"
    if binary.is_file():
        return binary, ""
    if not install:
        return None, "peer not installed"
    go = shutil.which("go")
    if go is None:
        return None, "peer not built (no go on PATH)"
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -modcacherw"}
    try:
        fetched = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            env=env, capture_output=True, text=True, timeout=600, check=True,
        )  # fmt: skip
        directory = json.loads(fetched.stdout)["Dir"]
        print(f"building vault-k8s {version} in {directory}", file=sys.stderr, flush=True)
        subprocess.run(
            [go, "build", "-o", str(binary), "."],
            cwd=directory, env=env, capture_output=True, text=True, timeout=1800, check=True,
        )  # fmt: skip
    except (subprocess.SubprocessError, KeyError, ValueError) as error:
        return None, f"peer not built ({str(error).splitlines()[0]})"
    return binary, ""


def _kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {args[0]} failed: {result.stderr.strip()[-500:]}")
    return result.stdout


@contextmanager
def _peer(binary: Path, tmp: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """vault-k8s serving on 127.0.0.1 with the test API server as its cluster."""
    kube = server_env("kube", [])  # a shared server: never stopped here
    kubeconfig = kube["DYNCONF_TEST_KUBECONFIG"]
    host, port = kube["DYNCONF_TEST_KUBE_APISERVER"].removeprefix("https://").rsplit(":", 1)
    _kubectl(kubeconfig, "apply", "-f", "-", stdin=RBAC)
    process = None
    try:
        token = _kubectl(kubeconfig, "create", "token", ACCOUNT, "-n", "default",
                         "--duration", "2h").strip()  # fmt: skip
        account = tmp / "run" / "secrets" / "kubernetes.io" / "serviceaccount"
        account.mkdir(parents=True)
        (account / "token").write_text(token)
        shutil.copy(kube["DYNCONF_TEST_KUBE_CA"], account / "ca.crt")
        (account / "namespace").write_text("default")
        listen = webhook_https.free_port()
        env = {**os.environ, "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
               "NAMESPACE": "default"}  # fmt: skip
        command = [
            "unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$1" /run && shift && exec "$@"', "sh", str(tmp / "run"),
            str(binary), "agent-inject", f"-listen=127.0.0.1:{listen}",
            f"-tls-cert-file={tmp / 'tls.crt'}", f"-tls-key-file={tmp / 'tls.key'}",
            "-vault-address=https://vault.vault.svc:8200", "-log-level=error",
        ]  # fmt: skip
        process = subprocess.Popen(
            command, env=env, stdout=(tmp / "peer.log").open("wb"), stderr=subprocess.STDOUT
        )
        yield process, listen
    finally:
        if process is not None:
            process.send_signal(signal.SIGINT)  # its trap is os.Interrupt
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for kind in ("clusterrolebinding", "clusterrole"):
            _kubectl(kubeconfig, "delete", kind, ACCOUNT, "--ignore-not-found")
        _kubectl(kubeconfig, "delete", "serviceaccount", ACCOUNT, "-n", "default",
                 "--ignore-not-found")  # fmt: skip


def checked_patch(port: int, context: ssl.SSLContext, body: bytes) -> list[dict[str, object]]:
    """The JSON patch the server answers for ``body``, after checking the pod is allowed."""
    conn = webhook_https.http.client.HTTPSConnection("127.0.0.1", port, context=context)
    answer = json.loads(webhook_https.admit(conn, body))["response"]
    conn.close()
    patch: list[dict[str, object]] = json.loads(base64.b64decode(answer["patch"]))
    if answer.get("allowed") is not True or not patch:
        raise SystemExit(f"port {port} did not allow the pod with a patch")
    return patch


def webhook_rows(
    options: argparse.Namespace, binary: Path | None, missing: str, row: Callable[[str, str], Any]
) -> dict[str, Any]:
    """``--rounds`` interleaved rounds of the paced and the sustained load on each side;
    ``row`` is ``peers.Row`` (passed in: ``peers.py`` runs as ``__main__``)."""
    rows = {
        "wh/p99": row(PACED, "µs"),
        "wh/p50": row(PACED_P50, "µs"),
        "wh/rps": row(SUSTAINED, "req/s"),
    }
    bodies = {"ours": webhook_https.BODY, "peer": webhook_https.review(PEER_ANNOTATIONS)}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        ours, ours_port, context = webhook_https.start_webhook(tmp)  # the peer serves its pair
        try:
            with _maybe_peer(binary, tmp) as peer:
                servers = {"ours": ours_port}
                if peer is not None:
                    webhook_https.wait_ready(peer[0], peer[1], context, "/health/ready")
                    servers["peer"] = peer[1]
                for side, port in servers.items():
                    checked_patch(port, context, bodies[side])
                for round_number in range(options.rounds):
                    order = list(servers) if round_number % 2 == 0 else list(reversed(servers))
                    for side in order:
                        port, body = servers[side], bodies[side]
                        p50, p99, _ = webhook_https.paced(port, context, options.paced, body)
                        getattr(rows["wh/p99"], side).append(p99 * 1000)
                        getattr(rows["wh/p50"], side).append(p50 * 1000)
                        rate = webhook_https.sustained(port, context, options.admissions, body)
                        getattr(rows["wh/rps"], side).append(rate)
        finally:
            ours.send_signal(signal.SIGTERM)
            ours.wait(timeout=60)
    if binary is None:
        for value in rows.values():
            value.missing = missing
    return rows


@contextmanager
def _maybe_peer(
    binary: Path | None, tmp: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int] | None]:
    if binary is None:
        yield None
        return
    with _peer(binary, tmp) as peer:
        yield peer
