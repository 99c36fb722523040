"""The agent's peak memory per store, against the 64Mi limit the webhook sets by default.

Run from the repo root: ``uv run python bench/agent_memory.py [stores…]`` (default: file
firestore s3). For each store a fresh ``dynamic-config-agent --watch 15`` subprocess renders
one document, then takes 20 changes one at a time (waiting for each file), the way a busy
sidecar lives; then its ``/proc`` status is read:

* ``VmHWM``: the peak resident set (the figure to keep under the limit);
* ``RssAnon`` / ``RssFile`` now: anonymous memory cannot be reclaimed, file-backed pages (the
  mapped libraries) can be dropped by the kernel before the cgroup's OOM killer acts.

``limit_mib`` is the store's default memory limit (the installation's per-store tier), and
``headroom_pct`` what the peak leaves of it (the target is at least 25 %); each store's figures
are kept in ``bench/results/agent_memory.json`` (``bench/results.py``). Servers come from
``scripts/testenv`` as in ``bench/agent_latency.py``, whose store harnesses this reuses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_latency import AGENT, AGENT_ENV, stop_started, store, wait_for
from results import record

CHANGES = 20
POLL_STORES = {"vault", "git", "s3"}
ENDPOINTS = {
    "consul": "http://consul.infra.svc:8500",
    "firestore": "demo-project",
    "s3": "bench-bucket",
    "redis": "redis://redis.infra.svc:6379/0",
    "etcd": "http://etcd.infra.svc:2379",
    "nats": "nats://nats.infra.svc:4222",
    "vault": "https://vault.infra.svc:8200",
    "git": "https://git.infra.svc/config.git",
    "config-server": "https://config.infra.svc",
}
"""An endpoint each store's admission accepts (only the limit it is given is read)."""
ANNOTATIONS = {"vault": {"dynamic-config.rs/token-secret": "vault-token/token"}}
"""What else a store's admission asks for (vault's default auth is a token from a Secret)."""


def status(pid: int) -> dict[str, float]:
    wanted = ("VmHWM", "VmRSS", "RssAnon", "RssFile")
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in wanted:
            out[name] = round(int(value.split()[0]) / 1024, 1)
    return out


def default_limit_mib(name: str) -> float:
    """The memory limit a default installation gives an agent of store ``name`` (the file
    store is not a pod source: it gets the fleet's built-in limit, as consul would)."""
    name = "consul" if name == "file" else name
    from dynconf_k8s.contract.installation import parse_installation
    from dynconf_k8s.contract.parse import parse_pod

    pod = {
        "metadata": {
            "annotations": {
                "dynamic-config.rs/inject": "true",
                "dynamic-config.rs/source": name,
                "dynamic-config.rs/endpoint": ENDPOINTS.get(name, "bench"),
                "dynamic-config.rs/key": "bench/doc.json",
                "dynamic-config.rs/path": "/config/app.json",
                **ANNOTATIONS.get(name, {}),
            }
        },
        "spec": {"containers": [{"name": "app", "image": "app:1"}]},
    }
    plan, _warnings = parse_pod(pod, parse_installation({}))
    assert plan is not None
    return float(str(plan.limits["memory"]).removesuffix("Mi"))


def bench_store(name: str, started: list[str], extra_env: dict[str, str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        AGENT_ENV.clear()
        args, write = store(name, started, tmp)
        out = tmp / "out" / "app.json"
        out.parent.mkdir()
        write(json.dumps({"n": -1}))
        env = {k: v for k, v in {**os.environ, **AGENT_ENV, **extra_env}.items() if v}
        proc = subprocess.Popen(
            [
                str(AGENT),
                "--source",
                name,
                *args,
                "--out",
                str(out),
                "--watch",
                "15" if name not in POLL_STORES else "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            wait_for(out, '"n": -1', timeout=30)
            for n in range(CHANGES):
                write(json.dumps({"n": n, "pad": "x" * 512}))
                wait_for(out, f'"n": {n},', timeout=30)
            time.sleep(1.0)
            memory = status(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        limit = default_limit_mib(name)
        return {
            "store": name,
            **{k.lower() + "_mib": v for k, v in memory.items()},
            "limit_mib": limit,
            "headroom_pct": round((1 - memory["VmHWM"] / limit) * 100, 1),
        }


KNOBS: dict[str, dict[str, str]] = {
    "grpc fork support off": {"GRPC_ENABLE_FORK_SUPPORT": "false"},
    "grpc poll strategy poll": {"GRPC_POLL_STRATEGY": "poll"},
    "malloc trim 0, mmap threshold 64k": {
        "MALLOC_TRIM_THRESHOLD_": "0",
        "MALLOC_MMAP_THRESHOLD_": "65536",
    },
    "PYTHONMALLOC=malloc": {"PYTHONMALLOC": "malloc"},
}
"""Process-level knobs tried against the firestore peak (``--knobs``); none moved it by more
than 1 MiB (at 2026-12 pins: grpcio 1.85, protobuf 7 upb, google-cloud-firestore 2.34), since
the peak is the imported client itself: grpc ~15 MiB, google-auth's cryptography ~13 MiB,
the firestore protobuf types ~8 MiB, api-core/proto-plus ~8 MiB, on the agent's ~33 MiB.
The agent already keeps one malloc arena (``mallopt``)."""


def main() -> None:
    args = sys.argv[1:]
    knobs = "--knobs" in args
    stores = [a for a in args if a != "--knobs"] or ["file", "firestore", "s3"]
    started: list[str] = []
    try:
        for name in stores:
            result = bench_store(name, started, {})
            print(json.dumps(result), flush=True)
            record("agent_memory", {
                f"{name}.{figure}": value
                for figure, value in result.items()
                if isinstance(value, int | float)
            })  # fmt: skip
            if knobs and name == "firestore":
                for label, env in KNOBS.items():
                    result = bench_store(name, started, env)
                    print(json.dumps({"knob": label, **result}), flush=True)
    finally:
        stop_started(started)


if __name__ == "__main__":
    main()
