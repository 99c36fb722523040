"""Admission as a pure function: median and p99 per admission.

Two pods: the canonical consul sidecar with no installation, and a pod with three named
renders under a full installation (fleet and per-store defaults, gates, fleet env).
Target: median <= 0.5 ms, p99 <= 2 ms.

    uv run python bench/webhook_admission.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import time

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.webhook import decide

CANONICAL = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "myapp/config.json",
    "dynamic-config.rs/path": "/config/rendered.toml",
    "dynamic-config.rs/mode": "sidecar",
}
FULL_ENV = {
    "DYNAMIC_CONFIG_AGENT_IMAGE": "registry.internal/dynamic-config-agent:v0.3.0",
    "DYNAMIC_CONFIG_AGENT_PULL_SECRET": "regcred",
    "DYNAMIC_CONFIG_AGENT_SOURCE": "vault",
    "DYNAMIC_CONFIG_AGENT_PATH": "/config/app.yaml",
    "DYNAMIC_CONFIG_AGENT_WATCH_SECONDS": "30",
    "DYNAMIC_CONFIG_AGENT_FILE_MODE": "0640",
    "DYNAMIC_CONFIG_AGENT_METRICS_PORT": "9110",
    "DYNAMIC_CONFIG_AGENT_MEMORY_LIMIT": "96Mi",
    "DYNAMIC_CONFIG_AGENT_ENV": "HTTPS_PROXY=http://egress:3128, RUST_LOG=info",
    "DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": (
        "vault: overridable=false, endpoint=https://vault.vault.svc:8200, auth=kubernetes, ca-configmap=vault-ca; "
        "redis: watch-seconds=10; consul: endpoint=http://consul.infra.svc:8500!, watch-seconds=10; "
        "etcd: watch-seconds=60"
    ),
    "DYNAMIC_CONFIG_WEBHOOK_SOURCE_ALLOW": "payments: vault, redis, consul, etcd; *: consul",
    "DYNAMIC_CONFIG_WEBHOOK_SOURCE_DENY": "sandbox: git",
    "DYNAMIC_CONFIG_WEBHOOK_AGENT_ENV_ALLOW": "payments: RUST_LOG, AWS_*",
}
NAMED = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/key": "secret/myapp",
    "dynamic-config.rs/auth-role": "myapp",
    "dynamic-config.rs/agent-env": "RUST_LOG=debug",
    "dynamic-config.rs/source.cache": "redis",
    "dynamic-config.rs/endpoint-secret.cache": "redis-url/url",
    "dynamic-config.rs/key.cache": "myapp/cache.json",
    "dynamic-config.rs/path.cache": "/config/cache.toml",
    "dynamic-config.rs/source.flags": "consul",
    "dynamic-config.rs/key.flags": "myapp/flags.json",
    "dynamic-config.rs/path.flags": "/config/flags.json",
    "dynamic-config.rs/token-secret.flags": "consul/token",
    "dynamic-config.rs/source.peers": "etcd",
    "dynamic-config.rs/endpoint.peers": "https://etcd:2379",
    "dynamic-config.rs/key.peers": "myapp/peers.json",
    "dynamic-config.rs/path.peers": "/config/peers.json",
    "dynamic-config.rs/tls-secret.peers": "etcd-client",
    "dynamic-config.rs/ca-configmap.peers": "etcd-ca",
}


def pod(annotations):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app", "annotations": annotations},
        "spec": {
            "containers": [{"name": "app", "image": "myapp:1"}, {"name": "log", "image": "fluent"}]
        },
    }


def measure(name, review, installation, rounds):
    decision = decide(review, installation)
    assert decision.outcome == "patched", decision.response
    for _ in range(200):
        decide(review, installation)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        decide(review, installation)
        samples.append(time.perf_counter() - start)
    samples.sort()
    median = statistics.median(samples) * 1000
    p99 = samples[int(len(samples) * 0.99) - 1] * 1000
    print(f"{name:<44} median {median:.3f} ms   p99 {p99:.3f} ms   (n={rounds})")
    return median, p99


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    results = [
        measure(
            "canonical consul sidecar, no installation",
            {"request": {"uid": "b", "namespace": "default", "object": pod(CANONICAL)}},
            parse_installation({}),
            rounds,
        ),
        measure(
            "three named renders, full installation",
            {"request": {"uid": "b", "namespace": "payments", "object": pod(NAMED)}},
            parse_installation(FULL_ENV),
            rounds,
        ),
    ]
    ok = all(m <= 0.5 and p <= 2.0 for m, p in results)
    print("targets (median <= 0.5 ms, p99 <= 2 ms):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
