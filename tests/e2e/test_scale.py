"""The burst leg of the end-to-end ladder: 200 annotated pods at once through the chart.

Two hundred tiny busybox pods, each with the agent injected as a watching sidecar on one Consul
key, are created in one burst (16 concurrent creates, as ``kubectl apply -f`` of a List sends
them one by one), with the chart's default webhook (two replicas, its default CPU request,
``failurePolicy: Ignore``) on the node the burst's pods start on, and one webhook replica
deleted halfway through; every pod must be admitted, with the agent. The webhook's own
histogram (``dynamic_config_admission_duration_seconds``, before and after, over the replica
that lived through the burst) gives the p99 bucket.
The kubelet runs as many as it holds (``maxPods`` 110, the kubelet's
default, less what already runs) and every pod it took must turn Ready within
``READY_BUDGET``; no agent may be OOMKilled or restarted. The figures: each pod's creation →
Ready (its Ready condition's transition, whole seconds), and each agent's start → first render
from its own log, which separates the agent's share from the kubelet's (sandbox, CNI, two
container starts per pod). On two cores that is CPU-bound: a hundred Python agents importing at
once, beside a hundred sandboxes being made; the agents' working sets come from the kubelet's
summary API.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.conftest import Release
from tests.e2e.support import AGENT, Injector
from tests.fixtures.node import KubeNode

pytestmark = pytest.mark.e2e

PODS = 200
CREATORS = 16
READY_BUDGET = 360.0
"""Seconds every pod the node took has to turn Ready after the burst (the node holds about 100)."""
HISTOGRAM = "dynamic_config_admission_duration_seconds"
KILL_AFTER = PODS // 2
"""Creates made before one webhook replica is deleted (graceful, as a rollout or a drain does)."""


def histograms(release: Release) -> dict[str, dict[float, float]]:
    """Each replica's cumulative bucket counts (``le`` → count) of the admission histogram."""
    found: dict[str, dict[float, float]] = {}
    for pod in _serving(release):
        buckets = found.setdefault(pod.metadata.name, {})
        for line in release.scrape(pod.metadata.name).splitlines():
            if line.startswith(f"{HISTOGRAM}_bucket{{"):
                labels, _, value = line.rpartition(" ")
                le = labels.split('le="', 1)[1].split('"', 1)[0]
                bound = float("inf") if le == "+Inf" else float(le)
                buckets[bound] = buckets.get(bound, 0.0) + float(value)
    return found


def _serving(release: Release) -> list[Any]:
    """The webhook replicas that can be scraped now (a replacement still starting cannot)."""
    return [p for p in release.webhook_pods() if p.status.pod_ip and _ready_at(p) is not None]


def refusals(release: Release) -> dict[str, float]:
    """Each replica's ``dynamic_config_admission_refusals_total`` over every reason."""
    found: dict[str, float] = {}
    for pod in _serving(release):
        name = pod.metadata.name
        found[name] = 0.0
        for line in release.scrape(name).splitlines():
            if line.startswith("dynamic_config_admission_refusals_total"):
                found[name] += float(line.rpartition(" ")[2])
    return found


def quantile_bucket(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The smallest bucket bound holding the ``q`` quantile of the admissions in between."""
    delta = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in after}
    total = delta.get(float("inf"), 0.0)
    assert total > 0, f"no admissions counted: {after}"
    return next(le for le in sorted(delta) if delta[le] >= q * total)


@pytest.fixture(scope="module")
def scale(
    kube_node: KubeNode, chart_release: Release, consul_server: Any
) -> Iterator[tuple[Injector, Release]]:
    namespace = chart_release.injecting_namespace()
    try:
        with kube_node.expose(consul_server.port) as endpoint:
            yield (
                Injector(chart_release.core, namespace, endpoint, consul_server, "scale"),
                (chart_release),
            )
    finally:
        chart_release.core.delete_namespace(namespace)  # 200 pods: not awaited here
        _await_webhooks(chart_release, 2)


def _await_webhooks(release: Release, count: int, timeout: float = 180.0) -> None:
    """Until ``count`` webhook replicas are Ready again (the deleted one was replaced)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(1 for p in release.webhook_pods() if _ready_at(p) is not None) >= count:
            return
        time.sleep(2)
    raise AssertionError(f"fewer than {count} webhook replicas Ready after {timeout:.0f} s")


def _summary(core: Any, node: str) -> dict[str, Any]:
    raw: bytes = core.connect_get_node_proxy_with_path(
        node, "stats/summary", _preload_content=False
    ).data
    summary: dict[str, Any] = json.loads(raw)
    return summary


def test_two_hundred_pods_admitted_and_the_node_runs_what_it_holds(
    scale: tuple[Injector, Release], kube_node: KubeNode
) -> None:
    injector, release = scale
    core = injector.core
    injector.put("e2e-scale/config.json", {"replicas": PODS})
    annotations = injector.annotations(
        "e2e-scale/config.json", mode="sidecar", **{"watch-seconds": "300"}
    )
    bodies = [
        injector.pod(f"scale-{i:03d}", annotations, "exec sleep 3600", "/config/rendered.toml")
        for i in range(PODS)
    ]
    for body in bodies:  # Ready is the agent's /readyz (HTTP); 100 exec probes a second would
        del body["spec"]["containers"][0]["readinessProbe"]  # be the node's whole CPU
    before, refused_before = histograms(release), refusals(release)
    victim = release.webhook_pods()[0].metadata.name
    survivors = [name for name in before if name != victim]
    began = time.monotonic()
    created = 0

    def create(body: dict[str, Any]) -> Any:
        nonlocal created
        made = core.create_namespaced_pod(injector.namespace, body)
        created += 1
        if created == KILL_AFTER:  # mid-burst: a replica goes, as in a rollout or a drain
            core.delete_namespaced_pod(victim, release.namespace)
        return made

    with ThreadPoolExecutor(CREATORS) as pool:
        made = list(pool.map(create, bodies))
    admitted = time.monotonic() - began
    after_all = histograms(release)
    after = {le: sum(after_all.get(n, {}).get(le, 0.0) for n in survivors) for le in
             {le for n in survivors for le in after_all.get(n, {})}}  # fmt: skip
    before = {le: sum(before[n].get(le, 0.0) for n in survivors) for le in after}
    # a replica that came up during the burst counts whole; the deleted one's counts are gone
    refused = sum(n - refused_before.get(pod, 0.0) for pod, n in refusals(release).items())
    injected = [p for p in made if any(c.name.startswith(AGENT) for c in
                                       [*(p.spec.init_containers or []), *p.spec.containers])]  # fmt: skip
    p50, p99 = quantile_bucket(before, after, 0.5), quantile_bucket(before, after, 0.99)

    deadline = time.monotonic() + READY_BUDGET
    ready: list[Any] = []
    scheduled: list[Any] = []
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(injector.namespace).items
        ready = [p for p in pods if _ready_at(p) is not None]
        scheduled = [p for p in pods if p.spec.node_name]
        if scheduled and len(ready) == len(scheduled):
            break  # everything the node took is Ready
        time.sleep(3)
    ready_after = time.monotonic() - began
    pods = core.list_namespaced_pod(injector.namespace).items
    pending = sum(1 for p in pods if not p.spec.node_name)
    to_ready = sorted(
        (ready_at - p.metadata.creation_timestamp).total_seconds()
        for p in pods if (ready_at := _ready_at(p)) is not None
    )  # fmt: skip
    starts = _agent_starts(core, injector.namespace, [p.metadata.name for p in ready][:20])
    restarted = [
        f"{p.metadata.name}/{c.name}" for p in pods for c in p.status.container_statuses or []
        if c.restart_count
    ]  # fmt: skip
    oom = [
        f"{p.metadata.name}/{c.name}"
        for p in pods for c in [*(p.status.init_container_statuses or []),
                                *(p.status.container_statuses or [])]
        if c.name.startswith(AGENT) and c.last_state and c.last_state.terminated
        and c.last_state.terminated.reason == "OOMKilled"
    ]  # fmt: skip
    summary = _summary(core, kube_node.name)
    sets = [
        c["memory"]["workingSetBytes"] / 2**20
        for p in summary["pods"] if p["podRef"]["namespace"] == injector.namespace
        for c in p.get("containers", []) if c["name"] == AGENT and "memory" in c
        and c["memory"].get("workingSetBytes")
    ]  # fmt: skip
    hooks = [
        c["memory"]["workingSetBytes"] / 2**20
        for p in summary["pods"] if p["podRef"]["namespace"] == release.namespace
        for c in p.get("containers", []) if c["name"] == "webhook"
        and c["memory"].get("workingSetBytes")
    ]  # fmt: skip
    print(f"\ne2e scale: webhook working set after the burst {[round(h) for h in hooks]} MiB")
    print(
        f"\ne2e scale: {len(made)} pods created in {admitted:.1f} s ({CREATORS} at a time), "
        f"{len(injected)} injected (webhook replica {victim} deleted after {KILL_AFTER}); "
        f"webhook admission (the surviving replica) p50 <= {p50 * 1000:g} ms, "
        f"p99 <= {p99 * 1000:g} ms (histogram buckets); {len(ready)} of {len(scheduled)} "
        f"scheduled Ready {ready_after:.0f} s after the burst, {pending} unschedulable "
        f"(maxPods); creation → Ready p50 {_q(to_ready, 0.5):.0f} s, p95 "
        f"{_q(to_ready, 0.95):.0f} s, max {_q(to_ready, 1.0):.0f} s; agent start → first "
        f"render ({len(starts)} agents) p50 {_q(starts, 0.5):.1f} s, max {_q(starts, 1.0):.1f} s; "
        "agent working "
        + (
            f"set per pod mean {statistics.mean(sets):.1f} MiB, max {max(sets):.1f} MiB "
            f"over {len(sets)} agents"
            if sets
            else "set: none reported"
        )
    )

    assert len(injected) == PODS
    assert refused == 0
    assert sets, "the kubelet's summary names no agent container"
    assert oom == [], f"agents OOMKilled: {oom}"
    assert restarted == [], f"containers restarted: {restarted}; " + _why(core, injector, restarted)
    unready = sorted({p.metadata.name for p in scheduled} - {p.metadata.name for p in ready})
    assert not unready, (
        f"{len(unready)} scheduled pods not Ready in {READY_BUDGET:.0f} s: {unready[:5]}"
    )


def _why(core: Any, injector: Injector, restarted: list[str]) -> str:
    """The last lines the first restarted container wrote before it ended (its reason)."""
    pod, _, container = restarted[0].partition("/")
    try:
        raw: bytes = core.read_namespaced_pod_log(
            pod, injector.namespace, container=container, previous=True, tail_lines=5,
            _preload_content=False,
        ).data  # fmt: skip
    except Exception as error:  # the log may be gone with the container
        return f"its previous log could not be read ({type(error).__name__})"
    return f"{restarted[0]} ended with: {raw.decode(errors='replace')[-1500:]}"


def _ready_at(pod: Any) -> Any:
    """When ``pod`` turned Ready (its condition's transition), or ``None`` while it is not."""
    for condition in pod.status.conditions or []:
        if condition.type == "Ready" and condition.status == "True":
            return condition.last_transition_time
    return None


def _agent_starts(core: Any, namespace: str, names: list[str]) -> list[float]:
    """Seconds from each agent's ``agent starting`` log line to its first ``rendered``."""
    starts: list[float] = []
    for name in names:
        raw: bytes = core.read_namespaced_pod_log(
            name, namespace, container=AGENT, _preload_content=False
        ).data
        events: dict[str, str] = {}
        for line in raw.decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                events.setdefault(str(record.get("event")), str(record.get("ts")))
        if "agent starting" in events and "rendered" in events:
            began = datetime.fromisoformat(events["agent starting"].replace("Z", "+00:00"))
            done = datetime.fromisoformat(events["rendered"].replace("Z", "+00:00"))
            starts.append((done - began).total_seconds())
    return sorted(starts)


def _q(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (nearest rank; nan when there are none)."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, round(q * len(values)) - 1))]
