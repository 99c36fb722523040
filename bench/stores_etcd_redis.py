"""Change-to-delivery latency of the etcd and redis push watches, and RSS per store.

Run from the repo root: ``uv run python bench/stores_etcd_redis.py``. Uses the servers
``scripts/testenv`` publishes (starting etcd and redis, and stopping them after, when they
are not running). Each store: 50 writes, one at a time, each timed from just before the write
to the moment ``changes()`` yields it (target p95 <= 100 ms). RSS: a fresh interpreter
imports the plugin, builds the source and does one fetch (the client library loads at the
first request), then reads VmRSS (target <= 40 MiB).
"""

from __future__ import annotations

import json
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / ".testenv"
CHANGES = 50


def server_env(name: str, started: list[str]) -> dict[str, str]:
    published = RUN / "published" / f"{name}.env"
    if not published.exists():
        subprocess.run([sys.executable, str(REPO / "scripts/testenv"), "start", name],
                       check=True, capture_output=True)  # fmt: skip
        started.append(name)
    return dict(line.split("=", 1) for line in published.read_text().split())


def latency(source: Any, write: Callable[[str], None]) -> list[float]:
    answers: queue.Queue[tuple[float, Any]] = queue.Queue()
    stop = threading.Event()
    ready = threading.Event()
    source.on_watching = ready.set

    def run() -> None:
        for answer in source.changes(30.0, stop.is_set):
            answers.put((time.perf_counter(), answer))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(15), "the watch did not start"
    samples = []
    for n in range(CHANGES):
        text = json.dumps({"n": n})
        started = time.perf_counter()
        write(text)
        while True:
            arrived, answer = answers.get(timeout=10)
            if getattr(answer, "text", None) == text:
                samples.append((arrived - started) * 1000)
                break
    stop.set()
    thread.join(5)
    source.close()
    return samples


RSS_PROBE = """
import sys
from dynconf.stores import StoreSpec
from dynconf_store_{name} import {const}
source = {const}.build(StoreSpec(source={name!r}, endpoint=sys.argv[1], key="bench/rss.json"))
built = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])
source.fetch()
fetched = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])
print(built, fetched)
"""


def rss(name: str, const: str, endpoint: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", RSS_PROBE.format(name=name, const=const),
                          endpoint], check=True, capture_output=True, text=True)  # fmt: skip
    built, fetched = (int(part) / 1024 for part in out.stdout.split())
    return built, fetched


def report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    print(
        f"{name}: watch latency over {len(samples)} changes: p50 {statistics.median(samples):.1f} "
        f"ms, p95 {p95:.1f} ms, max {ordered[-1]:.1f} ms (target p95 <= 100 ms)"
    )


def main() -> None:
    import redis

    from dynconf.stores import StoreSpec
    from dynconf_store_etcd import ETCD_STORE
    from dynconf_store_redis import REDIS_STORE

    started: list[str] = []
    try:
        etcd = server_env("etcd", started)
        redis_env = server_env("redis", started)
        etcd_url = etcd["DYNCONF_TEST_ETCD_URL"]
        redis_url = redis_env["DYNCONF_TEST_REDIS_URL"]

        from etcd3gw.client import Etcd3Client

        gateway = Etcd3Client(host=etcd["DYNCONF_TEST_ETCD_HOST"],
                              port=int(etcd["DYNCONF_TEST_ETCD_PORT"]))  # fmt: skip
        gateway.put("bench/latency.json", "{}")
        source = ETCD_STORE.build(StoreSpec(source="etcd", endpoint=etcd_url,
                                            key="bench/latency.json"))  # fmt: skip
        report("etcd", latency(source, lambda text: gateway.put("bench/latency.json", text)))

        client = redis.Redis.from_url(redis_url)
        client.set("bench:latency.json", "{}")
        source = REDIS_STORE.build(StoreSpec(source="redis", endpoint=redis_url,
                                             key="bench:latency.json"))  # fmt: skip
        report("redis", latency(source, lambda text: client.set("bench:latency.json", text)))

        for name, const, endpoint in (("etcd", "ETCD_STORE", etcd_url),
                                      ("redis", "REDIS_STORE", redis_url)):  # fmt: skip
            built, fetched = rss(name, const, endpoint)
            print(
                f"{name}: RSS after import+build {built:.1f} MiB, after first fetch "
                f"{fetched:.1f} MiB (target <= 40 MiB)"
            )
    finally:
        for name in started:
            subprocess.run([sys.executable, str(REPO / "scripts/testenv"), "stop", name],
                           check=False, capture_output=True)  # fmt: skip


if __name__ == "__main__":
    main()
