"""The served webhook over HTTPS on loopback: p99 at 200 req/s, and sustained admissions/s.

Starts ``dynamic-config-webhook serve`` as a subprocess (TLS from a pair minted in memory,
no installation) and drives ``POST /mutate`` with the canonical consul sidecar pod over
keep-alive HTTPS connections from this process, on the same two cores:

- paced: one keep-alive connection, an open loop at RATE req/s for SECONDS; latency is
  measured from each request's *scheduled* send time, so a server that falls behind pays for
  the queue it builds (target p99 <= 10 ms at 200 req/s);
- sustained: CONNECTIONS keep-alive connections sending back to back, TOTAL requests in all;
  admissions per second over the whole run.

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
BODY = json.dumps({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {"uid": "bench", "namespace": "default", "object": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "annotations": CANONICAL},
        "spec": {"containers": [{"name": "app", "image": "myapp:1"}]}}},
}).encode()  # fmt: skip
HEADERS = {"content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_webhook(directory: Path) -> tuple[subprocess.Popen[bytes], int, ssl.SSLContext]:
    minted = mint("dynamic-config-webhook", "bench", 3600, ("127.0.0.1",))
    (directory / "ca.crt").write_bytes(minted.ca)
    (directory / "tls.crt").write_bytes(minted.cert)
    (directory / "tls.key").write_bytes(minted.key)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_CONFIG_")}
    env.update({
        "DYNAMIC_CONFIG_WEBHOOK_ADDR": f"127.0.0.1:{port}",
        "DYNAMIC_CONFIG_WEBHOOK_TLS_CERT": str(directory / "tls.crt"),
        "DYNAMIC_CONFIG_WEBHOOK_TLS_KEY": str(directory / "tls.key"),
        "DYNAMIC_CONFIG_WEBHOOK_DEFAULTS_FILE": str(directory / "none.yaml"),
    })  # fmt: skip
    proc = subprocess.Popen([str(WEBHOOK), "serve"], env=env, stdout=subprocess.DEVNULL)
    context = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    deadline = time.monotonic() + 30
    while True:  # a subprocess's listener has no event to await; bounded by the deadline
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return proc, port, context
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("the webhook did not become ready")
        time.sleep(0.1)


def admit(conn: http.client.HTTPSConnection) -> None:
    conn.request("POST", "/mutate", body=BODY, headers=HEADERS)
    response = conn.getresponse()
    payload = response.read()
    if response.status != 200 or b'"patchType":"JSONPatch"' not in payload:
        raise SystemExit(f"unexpected answer {response.status}: {payload[:200]!r}")


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def paced(port: int, context: ssl.SSLContext, seconds: float) -> tuple[float, float, int]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    for _ in range(200):  # warm: TLS session, code paths, allocator
        admit(conn)
    count = int(RATE * seconds)
    latencies = []
    start = time.perf_counter()
    for i in range(count):
        scheduled = start + i / RATE
        wait = scheduled - time.perf_counter()
        if wait > 0:
            time.sleep(wait)  # the open loop's pacing is the thing measured against
        admit(conn)
        latencies.append(time.perf_counter() - scheduled)
    conn.close()
    return quantile(latencies, 0.5) * 1000, quantile(latencies, 0.99) * 1000, count


def sustained(port: int, context: ssl.SSLContext, total: int) -> float:
    each = total // CONNECTIONS
    conns = [
        http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        for _ in range(CONNECTIONS)
    ]
    for conn in conns:
        admit(conn)
    barrier = threading.Barrier(CONNECTIONS + 1)

    def run(conn: http.client.HTTPSConnection) -> None:
        barrier.wait()
        for _ in range(each):
            admit(conn)

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
          f"median {median:.2f} ms   p99 {p99:.2f} ms")  # fmt: skip
    print(f"sustained, {CONNECTIONS} keep-alive connections, {total} admissions: "
          f"{rate:.0f} admissions/s")  # fmt: skip
    ok = p99 <= 10.0
    print("target (p99 <= 10 ms at 200 req/s):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
