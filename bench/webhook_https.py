"""The served webhook over HTTPS on loopback: p99 at 200 req/s, and sustained admissions/s.

Starts ``dynamic-config-webhook serve`` as a subprocess (TLS from a pair minted in memory,
no installation) and drives ``POST /mutate`` with the canonical consul sidecar pod over
keep-alive HTTPS connections from this process, on the same two cores:

- paced: one keep-alive connection, an open loop at RATE req/s for SECONDS; each send is
  scheduled at ``start + i / RATE`` and its latency is measured from that *scheduled* time
  (``perf_counter``, reported in microseconds), so a server that falls behind pays for the
  queue it builds instead of slowing the clock (target p99 <= 10 ms at 200 req/s);
- sustained: CONNECTIONS keep-alive connections sending back to back, TOTAL requests in all;
  admissions per second over the whole run.

``bench/peers_webhook.py`` drives the vault-k8s injector with the same two loops
(:func:`paced`, :func:`sustained`, each given the pod's review body).

Every loop is bounded and stops by itself; everything stays on 127.0.0.1.

    uv run python bench/webhook_https.py [SECONDS] [TOTAL]
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from dynconf_k8s.webhook.rotation import mint

WEBHOOK = Path(sys.executable).with_name("dynamic-config-webhook")
RATE = 200
CONNECTIONS = 4
CANONICAL = {
    "dynamic-config.rs/inject": "true", "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500", "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml", "dynamic-config.rs/mode": "sidecar",
}  # fmt: skip
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def review(annotations: dict[str, str]) -> bytes:
    """The AdmissionReview of the canonical pod with ``annotations``: one container and the
    service-account token volume the API server adds before any webhook is called (the
    vault-k8s injector refuses a pod without it)."""
    token = {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
    volume = {"name": "kube-api-access-bench", "projected": {"sources": [token]}}
    mount = {"name": "kube-api-access-bench", "mountPath": SA_MOUNT, "readOnly": True}
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "app", "namespace": "default", "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "myapp:1", "volumeMounts": [mount]}],
                 "volumes": [volume]},
    }  # fmt: skip
    request = {"uid": "bench", "namespace": "default", "operation": "CREATE", "object": pod}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


BODY = review(CANONICAL)
HEADERS = {"content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_pair(directory: Path) -> ssl.SSLContext:
    """A serving pair for 127.0.0.1 in ``directory`` (``ca.crt``, ``tls.crt``, ``tls.key``)
    and the client context that trusts it."""
    minted = mint("dynamic-config-webhook", "bench", 3600, ("127.0.0.1",))
    (directory / "ca.crt").write_bytes(minted.ca)
    (directory / "tls.crt").write_bytes(minted.cert)
    (directory / "tls.key").write_bytes(minted.key)
    return ssl.create_default_context(cafile=str(directory / "ca.crt"))


def start_webhook(directory: Path) -> tuple[subprocess.Popen[bytes], int, ssl.SSLContext]:
    context = write_pair(directory)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")}
    env.update({
        "DYNAMIC_CONFIG_WEBHOOK_ADDR": f"127.0.0.1:{port}",
        "DYNAMIC_CONFIG_WEBHOOK_TLS_CERT": str(directory / "tls.crt"),
        "DYNAMIC_CONFIG_WEBHOOK_TLS_KEY": str(directory / "tls.key"),
        "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(directory / "none.yaml"),
    })  # fmt: skip
    proc = subprocess.Popen([str(WEBHOOK), "serve"], env=env, stdout=subprocess.DEVNULL)
    wait_ready(proc, port, context, "/readyz")
    return proc, port, context


def wait_ready(
    proc: subprocess.Popen[bytes], port: int, context: ssl.SSLContext, path: str
) -> None:
    """Until ``GET path`` answers 2xx over HTTPS; kills ``proc`` after 30 s or if it exits."""
    deadline = time.monotonic() + 30
    while True:  # a subprocess's listener has no event to await; bounded by the deadline
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
            conn.request("GET", path)
            if conn.getresponse().status in (200, 204):
                conn.close()
                return
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit(f"the server on port {port} did not become ready")
        time.sleep(0.1)


def admit(conn: http.client.HTTPSConnection, body: bytes = BODY) -> bytes:
    """One ``POST /mutate``; the answer must allow the pod with a JSON patch (both servers
    write compact JSON, so the two markers are byte strings)."""
    conn.request("POST", "/mutate", body=body, headers=HEADERS)
    response = conn.getresponse()
    payload = response.read()
    if (
        response.status != 200
        or b'"allowed":true' not in payload
        or b'"patchType":"JSONPatch"' not in payload
    ):
        raise SystemExit(f"unexpected answer {response.status}: {payload[:200]!r}")
    return payload


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def paced(
    port: int, context: ssl.SSLContext, seconds: float, body: bytes = BODY
) -> tuple[float, float, int]:
    """The open loop at RATE/s: (median ms, p99 ms, admissions)."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    for _ in range(200):  # warm: TLS session, code paths, allocator
        admit(conn, body)
    count = int(RATE * seconds)
    latencies = []
    start = time.perf_counter()
    for i in range(count):
        scheduled = start + i / RATE
        wait = scheduled - time.perf_counter()
        if wait > 0:
            time.sleep(wait)  # the open loop's pacing is the thing measured against
        admit(conn, body)
        latencies.append(time.perf_counter() - scheduled)
    conn.close()
    return quantile(latencies, 0.5) * 1000, quantile(latencies, 0.99) * 1000, count


def sustained(port: int, context: ssl.SSLContext, total: int, body: bytes = BODY) -> float:
    """CONNECTIONS closed loops, TOTAL admissions in all: admissions per second."""
    each = total // CONNECTIONS
    conns = [
        http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        for _ in range(CONNECTIONS)
    ]
    for conn in conns:
        admit(conn, body)
    barrier = threading.Barrier(CONNECTIONS + 1)

    def run(conn: http.client.HTTPSConnection) -> None:
        barrier.wait()
        for _ in range(each):
            admit(conn, body)

    threads = [threading.Thread(target=run, args=(conn,)) for conn in conns]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    took = time.perf_counter() - start
    for conn in conns:
        conn.close()
    return each * CONNECTIONS / took


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, context = start_webhook(Path(tmp))
        try:
            median, p99, count = paced(port, context, seconds)
            rate = sustained(port, context, total)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    print(f"cores: {os.cpu_count()}  (client and server share them)")
    print(f"paced {RATE} req/s, 1 keep-alive connection, {count} admissions: "
          f"median {median * 1000:.0f} µs   p99 {p99 * 1000:.0f} µs")  # fmt: skip
    print(f"sustained, {CONNECTIONS} keep-alive connections, {total} admissions: "
          f"{rate:.0f} admissions/s")  # fmt: skip
    ok = p99 <= 10.0
    print("target (p99 <= 10 ms at 200 req/s):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
