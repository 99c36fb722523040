"""The agent as the cluster runs it: change-to-file latency, RSS, idle CPU, init start time.

Run from the repo root: ``uv run python bench/agent_latency.py [stores…]`` (default: file
consul etcd redis). Uses the servers ``scripts/testenv`` publishes (starting, and afterwards
stopping, any that are not running). For each store a fresh ``dynamic-config-agent --watch 15``
subprocess renders one key; then 50 writes, one at a time, each timed from just before the write
to the moment the renamed file holds the new value (target p95 <= 250 ms). RSS is read from
``/proc`` after the first render (target <= 48 MiB; s3 and firestore <= 96 MiB). Idle CPU is the
process's CPU time over 10 s of no changes at ``--watch 15`` (target <= 1 % of a core). One-shot
start-to-first-render is the wall time of an init run against the file store (target <= 1.5 s).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / ".testenv"
AGENT = Path(sys.executable).with_name("dynamic-config-agent")
CHANGES = 50


def server_env(name: str, started: list[str]) -> dict[str, str]:
    published = RUN / "published" / f"{name}.env"
    if not published.exists():
        subprocess.run([sys.executable, str(REPO / "scripts/testenv"), "start", name],
                       check=True, capture_output=True)
        started.append(name)
    return dict(line.split("=", 1) for line in published.read_text().split())


def store(name: str, started: list[str], tmp: Path) -> tuple[list[str], Callable[[str], None]]:
    """Agent arguments for one store and a function writing a document into it."""
    key = f"bench/{uuid.uuid4().hex}.json"
    if name == "file":
        doc = tmp / "doc.json"

        def write_file(text: str) -> None:
            scratch = tmp / ".doc.tmp"
            scratch.write_text(text)
            scratch.replace(doc)

        return ["--key", str(doc)], write_file
    if name == "consul":
        import consul

        env = server_env("consul", started)
        host, _, port = env["DYNCONF_TEST_CONSUL_ADDR"].rpartition(":")
        kv = consul.Consul(host=host, port=int(port)).kv
        return ["--endpoint", env["DYNCONF_TEST_CONSUL_URL"], "--key", key], lambda t: kv.put(key, t)
    if name == "etcd":
        from etcd3gw.client import Etcd3Client

        env = server_env("etcd", started)
        client = Etcd3Client(host=env["DYNCONF_TEST_ETCD_HOST"], port=int(env["DYNCONF_TEST_ETCD_PORT"]))
        return ["--endpoint", env["DYNCONF_TEST_ETCD_URL"], "--key", key], lambda t: client.put(key, t)
    if name == "redis":
        import redis

        env = server_env("redis", started)
        client = redis.Redis.from_url(env["DYNCONF_TEST_REDIS_URL"])
        return ["--endpoint", env["DYNCONF_TEST_REDIS_URL"], "--key", key], lambda t: client.set(key, t)
    raise SystemExit(f"no bench harness for {name}")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(path: Path, text: str, timeout: float = 10.0) -> float:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        try:
            if text in path.read_text():
                return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.001)
    raise TimeoutError(f"{path} never held {text}")


def bench_store(name: str, started: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        args, write = store(name, started, tmp)
        out = tmp / "out" / "app.json"
        out.parent.mkdir()
        write(json.dumps({"n": -1}))
        proc = subprocess.Popen([str(AGENT), "--source", name, *args, "--out", str(out),
                                 "--watch", "15"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(out, '"n": -1')
            time.sleep(1.0)  # let the watch open and settle before measuring
            rss = rss_mib(proc.pid)
            before = cpu_seconds(proc.pid)
            time.sleep(10.0)
            idle = (cpu_seconds(proc.pid) - before) / 10.0 * 100
            samples = []
            for n in range(CHANGES):
                began = time.perf_counter()
                write(json.dumps({"n": n}))
                samples.append((wait_for(out, f'"n": {n}\n') - began) * 1000)
            samples.sort()
            return {"store": name, "p50_ms": round(statistics.median(samples), 1),
                    "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 1),
                    "rss_mib": round(rss, 1), "idle_cpu_pct": round(idle, 2)}
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def one_shot_start() -> float:
    with tempfile.TemporaryDirectory() as directory:
        doc = Path(directory) / "doc.yaml"
        doc.write_text("a: 1\n")
        runs = []
        for _ in range(5):
            began = time.perf_counter()
            subprocess.run([str(AGENT), "--source", "file", "--key", str(doc), "--out",
                            str(Path(directory) / "app.json")], check=True, capture_output=True)
            runs.append(time.perf_counter() - began)
        return round(statistics.median(runs), 3)


def main() -> None:
    stores = sys.argv[1:] or ["file", "consul", "etcd", "redis"]
    started: list[str] = []
    try:
        for name in stores:
            print(json.dumps(bench_store(name, started)))
        print(json.dumps({"one_shot_start_to_first_render_s": one_shot_start()}))
    finally:
        for name in started:
            subprocess.run([sys.executable, str(REPO / "scripts/testenv"), "stop", name],
                           check=False, capture_output=True)


if __name__ == "__main__":
    main()
