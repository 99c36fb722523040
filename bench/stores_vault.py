"""Vault store cost: one watch check (the metadata read), and RSS after build.

Poll cost: one secret on a loopback OpenBao; 300 watch checks (``GET <mount>/metadata/<path>``
through the store's transport, token keeper and parsing), p50/p95 per check. Beside it, the same
request sent with a bare ``requests`` session, so the store's own overhead shows as a ratio
from the same run, and a full document read through the store for scale.

RSS: a fresh interpreter imports dynconf-core and the vault plugin, builds a source and
reports VmRSS (target <= 40 MiB), next to a bare interpreter's RSS.

Run: ``uv run python bench/stores_vault.py`` (uses the published testenv OpenBao, or starts
one with ``scripts/testenv start vault`` and stops it afterwards).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKS = 300


def _published_vault() -> tuple[str, str] | None:
    env = REPO / ".testenv" / "env"
    if not env.is_file():
        return None
    values = dict(line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)
    addr, token = values.get("DYNCONF_TEST_VAULT_ADDR"), values.get("DYNCONF_TEST_VAULT_TOKEN")
    if not addr or not token:
        return None
    try:
        with urllib.request.urlopen(addr + "/v1/sys/health", timeout=2) as resp:
            return (addr, token) if b'"sealed":false' in resp.read() else None
    except OSError:
        return None


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(0, round(0.95 * len(ordered)) - 1)]


def _timed(call: Callable[[], object], rounds: int) -> list[float]:
    for _ in range(10):  # warm the connection pool
        call()
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def bench_poll(addr: str, token: str) -> tuple[list[float], list[float], list[float]]:
    import requests

    from dynconf.stores import StoreSpec
    from dynconf_store_vault import VAULT_STORE

    name = f"bench-{uuid.uuid4().hex[:8]}"
    session = requests.Session()
    session.headers["X-Vault-Token"] = token
    session.post(
        f"{addr}/v1/secret/data/{name}", json={"data": {f"k{i}": f"value-{i}" for i in range(20)}}
    ).raise_for_status()
    source = VAULT_STORE.build(StoreSpec(source="vault", endpoint=addr, key=f"secret/{name}",
                                         token=token))  # fmt: skip
    store_ms = _timed(source.check, CHECKS)
    raw_ms = _timed(lambda: session.get(f"{addr}/v1/secret/metadata/{name}").json(), CHECKS)
    read_ms = _timed(source.fetch, CHECKS // 3)
    session.delete(f"{addr}/v1/secret/metadata/{name}")
    source.close()
    return store_ms, raw_ms, read_ms


_RSS_PROBE = """
import sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
if sys.argv[1] == 'build':
    from dynconf.stores import StoreSpec
    from dynconf_store_vault.plugin import VAULT_STORE
    VAULT_STORE.build(StoreSpec(source='vault', endpoint='https://127.0.0.1:8200',
                                key='secret/myapp', token='t'))
print(rss())
"""


def bench_rss() -> tuple[float, float]:
    def probe(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", _RSS_PROBE, mode], capture_output=True,
                             text=True, check=True)  # fmt: skip
        return float(out.stdout.strip())

    return probe("bare"), probe("build")


def main() -> int:
    found = _published_vault()
    started_here = False
    if found is None:
        out = subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "start", "vault"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        started_here = True
        values = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
        found = (values["DYNCONF_TEST_VAULT_ADDR"], values["DYNCONF_TEST_VAULT_TOKEN"])
    try:
        store_ms, raw_ms, read_ms = bench_poll(*found)
    finally:
        if started_here:
            subprocess.run([sys.executable, str(REPO / "scripts" / "testenv"), "stop", "vault"],
                           capture_output=True, check=False)  # fmt: skip
    bare, built = bench_rss()
    s50, s95 = _percentiles(store_ms)
    r50, r95 = _percentiles(raw_ms)
    d50, d95 = _percentiles(read_ms)
    print(f"vault poll cost per check (metadata read), {CHECKS} checks: p50 {s50:.2f} ms  "
          f"p95 {s95:.2f} ms")  # fmt: skip
    print(f"raw metadata GET (requests):        p50 {r50:.2f} ms  p95 {r95:.2f} ms  "
          f"-> store/raw p50 ratio {s50 / r50:.2f}x")  # fmt: skip
    print(f"full document read (for scale):     p50 {d50:.2f} ms  p95 {d95:.2f} ms")
    print(f"RSS after import+build: {built:.1f} MiB (bare interpreter {bare:.1f} MiB; "
          f"target <= 40 MiB)")  # fmt: skip
    return 0 if built <= 40 else 1


if __name__ == "__main__":
    sys.exit(main())
