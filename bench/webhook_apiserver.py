"""200 annotated pods created through the test API server in one go, all admitted by the webhook.

Run from the repo root: ``uv run python bench/webhook_apiserver.py [N]`` (default 200). Uses
the kube control plane ``scripts/testenv`` publishes (start it first). Starts
``dynamic-config-webhook serve`` as a subprocess over TLS (pair minted in memory, metrics on a
plain loopback port), registers a MutatingWebhookConfiguration for one fresh namespace, creates
N canonical consul sidecar pods at once from a thread pool, and reports:

- refused pods (target 0) and pods that came back without the agent (target 0);
- wall time for the lot and the client-side create p99 (through the API server);
- the admission histogram's p99 read back from ``/metrics``
  (``dynamic_config_admission_duration_seconds``, interpolated within its bucket as
  Prometheus' ``histogram_quantile`` does).

Everything it creates is deleted at the end; the loops are bounded.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

from dynconf_k8s.webhook.rotation import mint

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the test support module, run as a script from the repo root

from tests.fixtures.kube import await_webhook_called  # noqa: E402

RUN = Path(os.environ.get("DYNCONF_TESTENV_RUN", REPO / ".testenv"))
WEBHOOK = Path(sys.executable).with_name("dynamic-config-webhook")
WORKERS = 16
CANONICAL = {
    "dynamic-config.rs/inject": "true", "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500", "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
}  # fmt: skip
HISTOGRAM = "dynamic_config_admission_duration_seconds"


def published() -> dict[str, str]:
    """The control plane's values: ``<run>/env`` (CI, all servers), else what ``start kube`` wrote."""
    for path in (RUN / "env", RUN / "published" / "kube.env"):
        if path.is_file():
            values = dict(line.split("=", 1) for line in path.read_text().split() if "=" in line)
            if "DYNCONF_TEST_KUBECONFIG" in values:
                return values
    raise SystemExit(f"no control plane under {RUN}: run `scripts/testenv start kube` first")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": CANONICAL},
        "spec": {"automountServiceAccountToken": False,
                 "containers": [{"name": "app", "image": "busybox"}]},
    }  # fmt: skip


def start_webhook(directory: Path) -> tuple[subprocess.Popen[bytes], int, int, bytes]:
    minted = mint("dynamic-config-webhook", "bench", 3600, ("127.0.0.1",))
    (directory / "tls.crt").write_bytes(minted.cert)
    (directory / "tls.key").write_bytes(minted.key)
    port, metrics_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")}
    env.update({
        "DYNAMIC_CONFIG_WEBHOOK_ADDR": f"127.0.0.1:{port}",
        "DYNAMIC_CONFIG_WEBHOOK_METRICS_ADDR": f"127.0.0.1:{metrics_port}",
        "DYNAMIC_CONFIG_WEBHOOK_TLS_CERT": str(directory / "tls.crt"),
        "DYNAMIC_CONFIG_WEBHOOK_TLS_KEY": str(directory / "tls.key"),
        "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(directory / "none.yaml"),
    })  # fmt: skip
    proc = subprocess.Popen([str(WEBHOOK), "serve"], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:  # a subprocess's listener has no event to await; bounded by the deadline
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=5):
                return proc, port, metrics_port, minted.ca
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("the webhook did not become ready")
        time.sleep(0.1)


def histogram_p99(text: str) -> tuple[float, int]:
    """``(p99 seconds, count)`` from the exposition, interpolated like histogram_quantile."""
    buckets: list[tuple[float, float]] = []
    for line in text.splitlines():
        if line.startswith(f"{HISTOGRAM}_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    count = buckets[-1][1]
    rank = 0.99 * count
    lower_bound, lower_count = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if bound == float("inf"):
                return lower_bound, int(count)
            share = (rank - lower_count) / max(cumulative - lower_count, 1e-12)
            return lower_bound + (bound - lower_bound) * share, int(count)
        lower_bound, lower_count = bound, cumulative
    return lower_bound, int(count)


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    kube = published()
    configuration = client.Configuration()
    config.load_kube_config(kube["DYNCONF_TEST_KUBECONFIG"], client_configuration=configuration)
    configuration.connection_pool_maxsize = WORKERS
    api = client.ApiClient(configuration)
    core, admission = client.CoreV1Api(api), client.AdmissionregistrationV1Api(api)
    tag = uuid.uuid4().hex[:8]
    namespace, mwc = f"bench-wh-{tag}", f"bench-wh-{tag}.dynamic-config.rs"
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, metrics_port, ca = start_webhook(Path(tmp))
        try:
            core.create_namespace({"metadata": {"name": namespace,
                                                "labels": {"dynconf-bench": tag}}})  # fmt: skip
            admission.create_mutating_webhook_configuration({
                "metadata": {"name": mwc},
                "webhooks": [{
                    "name": "inject.dynamic-config.rs", "admissionReviewVersions": ["v1"],
                    "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
                    "reinvocationPolicy": "IfNeeded",
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate",
                                     "caBundle": base64.b64encode(ca).decode()},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                               "apiVersions": ["v1"], "resources": ["pods"]}],
                    "namespaceSelector": {"matchLabels": {"dynconf-bench": tag}},
                }],
            })  # fmt: skip
            await_webhook_called(core, namespace, pod("probe"), timeout=30)

            def create(i: int) -> tuple[float, object]:
                began = time.perf_counter()
                try:
                    made = core.create_namespaced_pod(namespace, pod(f"p-{i}"))
                except ApiException as exc:
                    return time.perf_counter() - began, exc
                return time.perf_counter() - began, [c.name for c in made.spec.containers]

            start = time.perf_counter()
            with ThreadPoolExecutor(WORKERS) as pool:
                results = list(pool.map(create, range(count)))
            wall = time.perf_counter() - start
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
                exposition = resp.read().decode()
        finally:
            for undo in (
                lambda: admission.delete_mutating_webhook_configuration(mwc),
                lambda: core.delete_namespace(namespace),
            ):
                with contextlib.suppress(ApiException):
                    undo()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    refused = [r for _, r in results if isinstance(r, ApiException)]
    uninjected = [r for _, r in results if isinstance(r, list) and "dynamic-config-agent" not in r]
    latencies = sorted(t for t, _ in results)
    p99_seconds, observed = histogram_p99(exposition)
    print(f"{count} pods through the API server, {WORKERS} at a time: {wall:.2f} s "
          f"({count / wall:.0f} pods/s), create p99 {latencies[int(count * 0.99) - 1] * 1000:.1f} ms")  # fmt: skip
    print(f"refused: {len(refused)}   without the agent: {len(uninjected)}")
    print(f"admission histogram: {observed} admissions, p99 {p99_seconds * 1000:.3f} ms")
    print("  buckets (le: cumulative): " + ", ".join(
        line.split('le="', 1)[1].replace('"} ', ": ")
        for line in exposition.splitlines() if line.startswith(f"{HISTOGRAM}_bucket")
    ))  # fmt: skip
    if refused:
        print(f"first refusal: {refused[0].status} {refused[0].body[:300]}")
    return 0 if not refused and not uninjected else 1


if __name__ == "__main__":
    sys.exit(main())
