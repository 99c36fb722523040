"""Per-store call budgets on a kubelet node (issue 20, item 3).

One release of the chart (``dc-budget``) with ``agent.defaults.perStore.consul.store-budget:
"1/2"`` and the operator on: the webhook gives every consul agent ``--store-budget 1/2`` and the
operator takes the same budget (``DYNAMIC_CONFIG_STORE_BUDGETS``) for all its Renders. The
release selects only pods labelled ``dc-budget: "yes"``, so it never meets another release's.
The rate is below 2 a second on purpose: one Consul watch already starts its blocking queries
at least ``WATCH_FLOOR`` (0.5 s) apart, so a budget of 2 a second never bites a lone agent.

- an injected agent's calls to Consul are counted (``dynamic_config_agent_store_requests_total``)
  and a burst of changes is read at the budget (calls in a window <= rate * window + burst), the
  newest document still arriving, with ``store_budget_hit`` logged and neither the document's
  values nor the token in the log;
- twenty Renders of one operator share one budget: the operator's calls over a window stay at
  the budget while every Render converges on a change;
- a Consul that answers 503 with ``Retry-After`` (the loopback relay in front of the real server,
  :meth:`tests.fixtures.relay.Relay.throttle`: the fault the real server will not produce) makes
  the agent back off, counted as ``outcome="throttled"``, keep its last good file, and recover
  when the store does.

The agent reads Consul through that relay (a plain TCP pipe until the test throttles it), so one
pod serves both agent tests.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]
from prometheus_client.parser import text_string_to_metric_families

from dynconf_k8s.operator.types import CLASS_KIND, RENDER_KIND
from tests.e2e.conftest import InstallChart, Release, _crds
from tests.e2e.opnode_support import exec_in, new_namespace, wait_for
from tests.e2e.support import AGENT, wait_ready
from tests.e2e.test_operator import _operator_support
from tests.fixtures.node import KubeNode
from tests.fixtures.relay import Relay
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e

NAME = "dc-budget"
RATE, BURST = 1.0, 2
SELECT = {"dc-budget": "yes"}
VALUES: dict[str, Any] = {
    "webhook": {
        "replicas": 1,
        "podDisruptionBudget": {"enabled": False},
        "objectSelector": {"matchLabels": SELECT},
    },
    "agent": {"defaults": {"perStore": {"consul": {"store-budget": f"{RATE:g}/{BURST}"}}}},
    "operator": {"enabled": True},
}
AGENT_METRICS, OPERATOR_METRICS = 9110, 9090
WORKERS = 4
"""The operator's reconcile workers (its default): reads booked before a window opens may be
counted inside it, at most one per worker."""
AGENT_IN_FLIGHT = 2
"""An agent's reads that can be in flight at once: the watch's blocking query and a resync."""
RENDERS = 20
MARKER = f"marker-{uuid.uuid4().hex[:12]}"
"""A document value that must never reach a log."""
TOKEN = f"tok-{uuid.uuid4().hex}"
"""A throwaway ACL token (the test server has ACLs off): it must never reach a log."""


@dataclass
class Budgeted:
    release: Release
    consul: Any
    endpoint: str
    """Consul as the pods reach it (``host:port``)."""
    relay: Relay
    relayed: str
    """The relay in front of Consul, as the pods reach it."""

    @property
    def core(self) -> Any:
        return self.release.core

    def put(self, key: str, document: dict[str, Any]) -> None:
        self.consul.client.kv.put(key, json.dumps(document))


@pytest.fixture(scope="module")
def budgeted(
    install_chart: InstallChart, kube_node: KubeNode, kube_node_client: object, consul_server: Any
) -> Iterator[Budgeted]:
    """The release Ready, Consul and the relay in front of it exposed to the pods."""
    before = _crds(kube_node_client)
    began = time.monotonic()
    relay = Relay(consul_server.port)
    try:
        with (
            install_chart(NAME, VALUES, skip_crds=False) as release,
            kube_node.expose(consul_server.port) as endpoint,
            kube_node.expose(relay.port) as relayed,
        ):
            print(f"\nbudgets: release Ready in {time.monotonic() - began:.1f} s")
            yield Budgeted(release, consul_server, endpoint, relay, relayed)
    finally:
        relay.close()
    extensions = client.ApiextensionsV1Api(kube_node_client)
    for crd in _crds(kube_node_client) - before:
        extensions.delete_custom_resource_definition(crd)


def store_calls(text: str, prefix: str, store: str = "consul") -> dict[str, float]:
    """``{outcome: count}`` of ``<prefix>_store_requests_total`` for ``store``, all endpoints."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{prefix}_store_requests_total" and sample.labels["store"] == store:
                outcome = sample.labels["outcome"]
                out[outcome] = out.get(outcome, 0.0) + sample.value
    return out


def sent(counts: dict[str, float]) -> float:
    """The calls that reached the store: every outcome but ``budget`` (held or delayed)."""
    return sum(value for outcome, value in counts.items() if outcome != "budget")


def scrape(core: Any, namespace: str, pod: str, port: int) -> str:
    answer = core.connect_get_namespaced_pod_proxy_with_path(
        f"{pod}:{port}", namespace, "metrics", _preload_content=False
    )
    return str(answer.data.decode())


@dataclass
class AgentPod:
    namespace: str
    name: str
    key: str

    def calls(self, core: Any) -> dict[str, float]:
        return store_calls(
            scrape(core, self.namespace, self.name, AGENT_METRICS), "dynamic_config_agent"
        )

    def document(self, core: Any) -> dict[str, Any]:
        text = exec_in(core, self.namespace, self.name, "app", "cat", "/config/app.json")
        try:
            loaded: dict[str, Any] = json.loads(text)
        except ValueError:
            return {}
        return loaded

    def log(self, core: Any) -> str:
        return str(
            core.read_namespaced_pod_log(
                self.name, self.namespace, container=AGENT, _preload_content=False
            ).data.decode(errors="replace")
        )


@pytest.fixture(scope="module")
def agent_pod(budgeted: Budgeted) -> AgentPod:
    """An injected pod reading Consul through the relay with a token, Ready on its file."""
    core = budgeted.core
    namespace = budgeted.release.injecting_namespace()
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": "consul-token"}, "stringData": {"token": TOKEN},
    })  # fmt: skip
    key = f"e2e-budget/{uuid.uuid4().hex[:8]}/app.json"
    budgeted.put(key, {"marker": MARKER, "n": 0})
    annotations = {
        f"dynamic-config.rs/{k}": v
        for k, v in {
            "inject": "true",
            "source": "consul",
            "endpoint": f"http://{budgeted.relayed}",
            "key": key,
            "path": "/config/app.json",
            "token-secret": "consul-token/token",
        }.items()
    }
    body = {
        "metadata": {"name": "budgeted", "labels": SELECT, "annotations": annotations},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                "command": ["sh", "-c", "exec sleep 3600"],
                "readinessProbe": {"exec": {"command": ["test", "-s", "/config/app.json"]},
                                   "periodSeconds": 1, "timeoutSeconds": 10},
            }],
        },
    }  # fmt: skip
    began = time.monotonic()
    core.create_namespaced_pod(namespace, body)
    pod = wait_ready(core, namespace, "budgeted", timeout=180)
    print(f"\nbudgets: injected pod Ready {time.monotonic() - began:.1f} s after create")
    [agent] = [c for c in pod.spec.containers if c.name == AGENT]
    assert agent.args[agent.args.index("--store-budget") + 1] == f"{RATE:g}/{BURST}"
    return AgentPod(namespace, "budgeted", key)


def test_an_agent_reads_a_burst_of_changes_at_its_store_budget(
    budgeted: Budgeted, agent_pod: AgentPod
) -> None:
    core, changes = budgeted.core, 50
    time.sleep(1.0)  # let the start's reads (first render, prime, catch-up) settle
    opened = time.monotonic()
    before = agent_pod.calls(core)
    for n in range(1, changes + 1):
        budgeted.put(agent_pod.key, {"marker": MARKER, "n": n})
        time.sleep(0.1)
    burst = time.monotonic() - opened
    wait_for(lambda: agent_pod.document(core).get("n") == changes, 60, "the newest document")
    arrived = time.monotonic() - opened
    after = agent_pod.calls(core)
    window = time.monotonic() - opened

    calls = sent(after) - sent(before)
    # every call admitted in the window, plus those booked before it opened and answered in it
    ceiling = RATE * window + BURST + AGENT_IN_FLIGHT
    print(
        f"\nbudgets: agent: {changes} changes in {burst:.1f} s read with {calls:.0f} calls in "
        f"{window:.1f} s ({calls / window:.2f}/s, budget {RATE:g}/s burst {BURST}, ceiling "
        f"{ceiling:.0f}); the newest document in the file {arrived:.1f} s after the burst began; "
        f"{after.get('budget', 0) - before.get('budget', 0):.0f} calls waited for the budget"
    )
    assert calls <= ceiling
    assert after.get("ok", 0) > before.get("ok", 0)
    assert after.get("budget", 0) > before.get("budget", 0), "the burst never met the budget"
    log = agent_pod.log(core)
    hits = [json.loads(line) for line in log.splitlines() if "store_budget_hit" in line]
    assert hits, log[-2000:]
    assert hits[0]["store"] == "consul" and hits[0]["budget"] == f"{RATE:g}/{BURST}"
    assert MARKER not in log
    assert TOKEN not in log


def test_a_throttling_store_backs_the_agent_off_and_it_recovers(
    budgeted: Budgeted, agent_pod: AgentPod
) -> None:
    core, relay, hold = budgeted.core, budgeted.relay, 12.0
    budgeted.put(agent_pod.key, {"marker": MARKER, "n": 100})
    wait_for(lambda: agent_pod.document(core).get("n") == 100, 60, "the document before")
    before = agent_pod.calls(core)

    relay.throttle(503, retry_after=2)
    try:
        began = time.monotonic()
        budgeted.put(agent_pod.key, {"marker": MARKER, "n": 101})
        time.sleep(hold)
        refused = len(relay.refused)
        during = agent_pod.calls(core)
        kept = agent_pod.document(core)
    finally:
        relay.restore()
    restored = time.monotonic()
    wait_for(lambda: agent_pod.document(core).get("n") == 101, 60, "the document after")
    recovered = time.monotonic() - restored
    after = agent_pod.calls(core)

    print(
        f"\nbudgets: a 503 store (Retry-After 2 s) was asked {refused} times in "
        f"{restored - began:.1f} s; the agent read the change {recovered:.1f} s after it recovered"
    )
    assert kept.get("n") == 100, "the last good file stays while the store throttles"
    assert during.get("throttled", 0) > before.get("throttled", 0)
    assert 1 <= refused <= (restored - began) / 2 + 2, "retries spaced by Retry-After and backoff"
    assert after.get("ok", 0) > during.get("ok", 0)
    log = agent_pod.log(core)
    assert MARKER not in log and TOKEN not in log


def test_one_operators_renders_share_one_budget_and_all_converge(budgeted: Budgeted) -> None:
    release, core = budgeted.release, budgeted.core
    kube = _operator_support().Kube(release.api_client)
    apps = new_namespace(core)
    release.namespaces.append(apps)
    selector = f"app.kubernetes.io/instance={NAME},app.kubernetes.io/component=operator"
    [operator] = [
        p.metadata.name
        for p in core.list_namespaced_pod(release.namespace, label_selector=selector).items
        if p.metadata.deletion_timestamp is None
    ]
    kube.create(CLASS_KIND, apps, "consul",
                {"source": "consul", "endpoint": f"http://{budgeted.endpoint}"})  # fmt: skip
    prefix = f"e2e-budget/{uuid.uuid4().hex[:8]}"
    for i in range(RENDERS):
        budgeted.put(f"{prefix}/{i}.json", {"render": i, "generation": 1})
    began = time.monotonic()
    for i in range(RENDERS):
        spec = {"class": "consul", "key": f"{prefix}/{i}.json", "intervalSeconds": 1,
                "target": {"configMap": f"r{i}", "file": "app.json"}}  # fmt: skip
        kube.create(RENDER_KIND, apps, f"r{i}", spec)

    def converged(generation: int) -> bool:
        maps = core.list_namespaced_config_map(apps).items
        wanted = {f"r{i}" for i in range(RENDERS)}
        done = {
            m.metadata.name
            for m in maps
            if m.metadata.name in wanted
            and json.loads((m.data or {}).get("app.json", "{}")).get("generation") == generation
        }
        return done == wanted

    wait_for(lambda: converged(1), 120, f"{RENDERS} Renders' first ConfigMaps")
    first = time.monotonic() - began

    opened = time.monotonic()
    before = store_calls(scrape(core, release.namespace, operator, OPERATOR_METRICS),
                         "dynamic_config_operator")  # fmt: skip
    for i in range(RENDERS):
        budgeted.put(f"{prefix}/{i}.json", {"render": i, "generation": 2})
    wait_for(lambda: converged(2), 120, f"{RENDERS} Renders' changed ConfigMaps")
    changed = time.monotonic() - opened
    after = store_calls(scrape(core, release.namespace, operator, OPERATOR_METRICS),
                        "dynamic_config_operator")  # fmt: skip
    window = time.monotonic() - opened

    calls = sent(after) - sent(before)
    ceiling = RATE * window + BURST + WORKERS
    print(
        f"\nbudgets: operator: {RENDERS} Renders (intervalSeconds 1, {RENDERS}/s asked) first "
        f"converged in {first:.1f} s; a change to all reached every ConfigMap in {changed:.1f} s "
        f"with {calls:.0f} calls in {window:.1f} s ({calls / window:.2f}/s, budget {RATE:g}/s, "
        f"ceiling {ceiling:.0f})"
    )
    assert calls <= ceiling
    assert after.get("budget", 0) > before.get("budget", 0)
