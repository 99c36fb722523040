"""Consul store cost: change-to-delivery latency of the push watch, and RSS after build.

Latency: one watched key on a loopback Consul; 50 changes, each timed from just before the
PUT is sent until ``changes()`` yields the new document (p50/p95; target p95 ≤ 100 ms).
Beside it, the raw blocking-query round trip through the same client (PUT → the blocking GET
answers), so the store's own overhead shows as a ratio from the same run.

CPU per answer: the same GET of one key, answered by Consul, read N times through py-consul's
own client (requests) and through the store's transport (py-consul's client contract on
urllib3), interleaved in one process; ``time.process_time`` per answer and the ratio. A watch
reads one answer per change and one per blocking-query renewal, so this is the store's share of
a change's CPU and of its idle cost.

RSS: a fresh interpreter imports dynconf-core and the consul plugin, builds a source and
reports VmRSS (target ≤ 40 MiB), next to a bare interpreter's RSS.

Run: ``uv run python bench/stores_consul.py`` (uses the published testenv Consul, or starts
one with ``scripts/testenv start consul`` and stops it afterwards). The figures are kept in
``bench/results/stores_consul.json`` (``bench/results.py``).
"""

from __future__ import annotations

import json
import queue
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results import record

REPO = Path(__file__).resolve().parents[1]
CHANGES = 50


def _published_consul() -> str | None:
    env = REPO / ".testenv" / "env"
    if not env.is_file():
        return None
    for line in env.read_text().splitlines():
        if line.startswith("DYNCONF_TEST_CONSUL_URL="):
            url = line.split("=", 1)[1]
            try:
                with urllib.request.urlopen(url + "/v1/status/leader", timeout=2) as resp:
                    if b'"127.' in resp.read():
                        return url
            except OSError:
                return None
    return None


def _put(url: str, key: str, value: str) -> None:
    request = urllib.request.Request(f"{url}/v1/kv/{key}", data=value.encode(), method="PUT")
    with urllib.request.urlopen(request, timeout=5) as resp:
        resp.read()


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return statistics.median(ordered), p95


def bench_latency(url: str) -> tuple[list[float], list[float]]:
    from dynconf.stores import StoreSpec
    from dynconf_store_consul.plugin import CONSUL_STORE

    key = f"bench/{uuid.uuid4().hex}/config.json"
    _put(url, key, json.dumps({"n": 0}))
    source = CONSUL_STORE.build(
        StoreSpec(source="consul", endpoint=url, key=key, extra={"wait": "5s"})
    )
    delivered: queue.Queue[tuple[float, str]] = queue.Queue()
    stopping = threading.Event()

    def run() -> None:
        for item in source.changes(10.0, stopping.is_set):
            delivered.put((time.perf_counter(), getattr(item, "text", "")))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while not source.connected:
        time.sleep(0.005)
    store_ms: list[float] = []
    for n in range(1, CHANGES + 1):
        text = json.dumps({"n": n})
        time.sleep(0.02)  # let the watch re-arm its blocking query
        started = time.perf_counter()
        _put(url, key, text)
        while True:
            at, got = delivered.get(timeout=10)
            if got == text:
                store_ms.append((at - started) * 1000)
                break
    stopping.set()

    # Baseline: the same blocking query through py-consul's client, no store around it.
    import consul

    host, port = url.removeprefix("http://").rsplit(":", 1)
    client = consul.Consul(host=host, port=int(port))
    index, _ = client.kv.get(key)
    raw_ms: list[float] = []
    for n in range(CHANGES):
        answered: queue.Queue[float] = queue.Queue()

        def block(since: str = index, sink: queue.Queue[float] = answered) -> None:
            client.kv.get(key, index=since, wait="5s")
            sink.put(time.perf_counter())

        waiter = threading.Thread(target=block, daemon=True)
        waiter.start()
        time.sleep(0.02)
        started = time.perf_counter()
        _put(url, key, json.dumps({"raw": n}))
        raw_ms.append((answered.get(timeout=10) - started) * 1000)
        waiter.join()
        index, _ = client.kv.get(key)
    thread.join(10)
    source.close()
    return store_ms, raw_ms


CPU_ANSWERS = 2000


def bench_cpu(url: str) -> tuple[float, float]:
    """CPU microseconds per answer: py-consul's requests client, then the store's transport."""
    import consul

    from dynconf.stores import TlsSettings
    from dynconf_store_consul.transport import Endpoint, Transport, parse_endpoint

    key = f"bench/{uuid.uuid4().hex}/config.json"
    _put(url, key, json.dumps({"n": 0}))
    host, port = url.removeprefix("http://").rsplit(":", 1)
    requests_client = consul.Consul(host=host, port=int(port)).http
    endpoint = parse_endpoint(url)
    assert isinstance(endpoint, Endpoint), endpoint
    ours = Transport(endpoint, TlsSettings(), timeout=10.0, describe="bench")
    path = f"/v1/kv/{key}"

    def with_requests() -> None:
        requests_client.get(lambda answer: answer.body, path)

    def with_ours() -> None:
        ours.call("GET", path)

    spent: dict[str, list[float]] = {"requests": [], "ours": []}
    for _ in range(5):
        for name, call in (("requests", with_requests), ("ours", with_ours)):
            call()
            began = time.process_time()
            for _ in range(CPU_ANSWERS // 5):
                call()
            spent[name].append((time.process_time() - began) / (CPU_ANSWERS // 5) * 1e6)
    ours.close()
    return statistics.median(spent["requests"]), statistics.median(spent["ours"])


_RSS_PROBE = """
import sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
if sys.argv[1] == 'build':
    from dynconf.stores import StoreSpec
    from dynconf_store_consul.plugin import CONSUL_STORE
    CONSUL_STORE.build(StoreSpec(source='consul', endpoint='http://127.0.0.1:8500',
                                 key='app/config.json'))
print(rss())
"""


def bench_rss() -> tuple[float, float]:
    def probe(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", _RSS_PROBE, mode], capture_output=True,
                             text=True, check=True)  # fmt: skip
        return float(out.stdout.strip())

    return probe("bare"), probe("build")


def main() -> int:
    url = _published_consul()
    started_here = False
    if url is None:
        out = subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "start", "consul"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        started_here = True
        url = next(line.split("=", 1)[1] for line in out.stdout.splitlines()
                   if line.startswith("DYNCONF_TEST_CONSUL_URL="))  # fmt: skip
    try:
        store_ms, raw_ms = bench_latency(url)
        cpu_requests, cpu_ours = bench_cpu(url)
    finally:
        if started_here:
            subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "stop", "consul"],
                           capture_output=True, check=False)  # fmt: skip
    bare, built = bench_rss()
    s50, s95 = _percentiles(store_ms)
    r50, r95 = _percentiles(raw_ms)
    print(f"consul push watch, {CHANGES} changes: p50 {s50:.2f} ms  p95 {s95:.2f} ms  "
          f"max {max(store_ms):.2f} ms  (target p95 <= 100 ms)")  # fmt: skip
    print(f"raw blocking query (py-consul):   p50 {r50:.2f} ms  p95 {r95:.2f} ms  "
          f"-> store/raw p50 ratio {s50 / r50:.2f}x")  # fmt: skip
    print(f"CPU per answer, {CPU_ANSWERS} GETs each: py-consul's requests client "
          f"{cpu_requests:.0f} us, the store's transport {cpu_ours:.0f} us "
          f"-> ours/requests {cpu_ours / cpu_requests:.2f}x")  # fmt: skip
    print(f"RSS after import+build: {built:.1f} MiB (bare interpreter {bare:.1f} MiB; "
          f"target <= 40 MiB)")  # fmt: skip
    record("stores_consul", {
        "watch.p50_ms": round(s50, 2),
        "watch.p95_ms": round(s95, 2),
        "raw_blocking_query.p50_ms": round(r50, 2),
        "cpu_per_answer.requests_us": round(cpu_requests),
        "cpu_per_answer.store_us": round(cpu_ours),
        "cpu_per_answer.ratio": round(cpu_ours / cpu_requests, 2),
        "rss_after_build_mib": round(built, 1),
    })  # fmt: skip
    return 0 if s95 <= 100 and built <= 40 else 1


if __name__ == "__main__":
    sys.exit(main())
