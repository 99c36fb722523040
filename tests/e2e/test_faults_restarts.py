"""The fault ladder's restart legs: the platform's own processes killed or restarted under
running pods (the store's faults are ``test_faults.py``'s).

Every reader here is a container running ``faults_support.reader`` on one file, held to
``faults_support.FileInvariants`` from the moment its pod is Ready to the end of its leg: each
write shows within ``BOUND`` seconds, and no reader ever sees its file missing, empty, torn or
going back a generation — while the process that writes the file is dead, and while the
control plane or the kubelet restarts. Consul is the store (the e2e ladder's), reached by
pods through a relay of this module's own exposed at the node address.

- **the node agent killed** with 50 CSI volumes mounted: 10 pods of 5 inline volumes, one per
  document (5 documents, 10 readers each: 5 shared watches), a reader container per volume.
  The node agent's container is SIGKILLed through containerd and the kubelet restarts it. A
  write made while it is down shows once it serves again; one made after shows within the
  bound (its watches resumed); its gauges come back to 5 documents and 50 readers; the
  driver stays registered; the container restarted exactly once.
- **the operator leader killed** while reconciling 500 Renders: the chart's operator with
  ``operator.replicas=2``; 500 Renders, each its own document and ConfigMap, are created at
  once; once ``KILL_AT`` targets are written the Lease holder's container is SIGKILLed and its
  pod deleted. Another replica takes the Lease within the term plus one try of a follower
  (measured from the kill): the surviving one, or the ReplicaSet's replacement — a fresh
  candidate waits a whole term from its first look, the survivor a term from the last change
  it saw (up to one try after the last renewal), so either may come first. Every Render
  ends Ready, every target holds its own document, and a watch on the targets from before
  the first create counted exactly one write per target: none lost, none repeated.
- **kube-apiserver, then the kubelet, restarted** (``disruption_support.restart_component``)
  with an injected pod, a CSI pod and a Render running. Afterwards the webhook injects a new
  pod, the operator follows a Render's change, the node agent publishes a new volume, the
  agent and the node agent deliver a new write to old and new pods alike, and nothing is
  crash-looping. No container restarted, except that an API outage as long as the
  operator's term (less one renewal) restarts the Lease holder once, as it must: a leader
  that cannot renew for a whole term ends itself ("the leader lease was lost"). On SIGTERM
  the apiserver closes its port at once, then drains its clients' open connections (the
  kubelet's, the controllers', every watch) for its whole 60 s shutdown timeout (measured,
  with no test client connected); ``restart_component`` SIGKILLs it after 15 s, so the API
  is away about 19 s here and the leader does restart. It disturbs every session using the node:
  it is the module's last test and holds ``node_disruption`` exclusively, the others shared.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch  # type: ignore[import-untyped]

from dynconf_k8s.contract.registry import annotation
from dynconf_k8s.node.service import DRIVER_NAME
from dynconf_k8s.operator.election import LEASE_NAME, LOST_MESSAGE
from dynconf_k8s.operator.types import GROUP, PLURALS, RENDER_KIND, VERSION
from tests.e2e.conftest import Release
from tests.e2e.disruption_support import kill_container, node_disruption, restart_component
from tests.e2e.faults_support import FileInvariants, Verdict, reader, streaming_core
from tests.e2e.opnode_support import (
    applied,
    is_ready,
    memory_note,
    new_namespace,
    pod_metrics,
    pod_trouble,
    render_component,
    wait_for,
    wait_pod_gone,
    wait_pod_ready,
    working_set_mib,
)
from tests.e2e.stores_support import Workspace, load_conftest
from tests.e2e.support import statuses
from tests.e2e.test_node_agent import NodeAgentOnNode, csinode_drivers
from tests.e2e.test_operator import OperatorOnNode
from tests.fixtures.node import KubeNode, ProjectImage
from tests.fixtures.relay import relay_factory
from tests.testenv.test_node import BUSYBOX

pytestmark = pytest.mark.e2e

WATCH = 5
"""``watch-seconds`` of every reader: a push watch is confirmed by a read at least this often."""
SLACK = 8
BOUND = 2 * WATCH + SLACK
"""Seconds a reader has to show a write (2 * watch-seconds, plus slack for a loaded node)."""
NODE_AGENT = "app.kubernetes.io/component=node-agent"
OPERATOR = "app.kubernetes.io/component=operator"
NODE_AGENT_METRICS = 9111
OPERATOR_METRICS = 9090

DOCUMENTS_PER_POD = 5
VOLUME_PODS = 10
"""5 documents x 10 pods: 50 volumes, each document shared by 10 of them."""

RENDERS = 500
KILL_AT = 150
"""Targets written when the leader is killed: mid-way through the first reconcile of all."""
FOLLOWER_RETRY = 2.0
"""Seconds between a follower's tries for the Lease (``LeaderElector``'s ``retry_seconds``)."""
LEADER_RENEW = 5.0
"""Seconds between the leader's renewals (``LeaderElector``'s ``renew_seconds``)."""


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def consul_at(kube_node: KubeNode, consul_server: Any) -> Iterator[str]:
    """``host:port`` at which pods reach Consul: a relay of this module's own, exposed at the
    node address, so no other session's exposure of Consul's port collides with it."""
    with relay_factory() as relay, kube_node.expose(relay(consul_server.port).port) as at:
        yield at


def _pods(core: Any, namespace: str, selector: str) -> list[str]:
    items = core.list_namespaced_pod(namespace, label_selector=selector).items
    return sorted(p.metadata.name for p in items if p.metadata.deletion_timestamp is None)


@pytest.fixture(scope="module")
def node_agent(
    kube_node: KubeNode,
    kube_node_client: object,
    node_image: ProjectImage,
    helm_bin: Path,
    consul_server: Any,
    consul_at: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[NodeAgentOnNode]:
    """The chart's node agent (``nodeAgent.enabled=true``) as the node's only one, Ready."""
    node_image("node-agent")
    core = client.CoreV1Api(kube_node_client)
    others = core.list_pod_for_all_namespaces(label_selector=NODE_AGENT).items
    assert not others, (
        f"a node agent already runs on the node ({others[0].metadata.namespace}): one driver "
        f"{DRIVER_NAME} per kubelet; run this module when that session is done"
    )
    system = new_namespace(core, "dc-node")
    objects = render_component(
        helm_bin, tmp_path_factory.mktemp("chart"), system, "node-agent", "nodeAgent.enabled=true"
    )
    with applied(kube_node_client, objects, system):
        (pod,) = wait_for(lambda: _pods(core, system, NODE_AGENT), 60, "the DaemonSet's pod")
        wait_pod_ready(core, system, pod)
        # no namespace of application pods: each leg makes its own
        yield NodeAgentOnNode(core, system, "", pod, consul_server, consul_at)
        memory = working_set_mib(core, kube_node.name, system, pod)
        print(f"\nfaults restarts: node agent {memory_note(memory, 256)}")
    core.delete_namespace(system)


@pytest.fixture(scope="module")
def operator_pair(
    chart_release: Release,
    kube_node: KubeNode,
    kube_node_client: object,
    node_image: ProjectImage,
    helm_bin: Path,
    consul_server: Any,
    consul_at: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorOnNode]:
    """The chart's operator with ``operator.replicas=2``: both pods Ready, one leading.

    ``chart_release`` comes first: the CRDs are then the session release's, and this module
    neither creates nor deletes them (``applied`` is given none). The handle's ``apps``
    namespace has a Consul class.
    """
    node_image("operator")
    core = client.CoreV1Api(kube_node_client)
    system, apps = new_namespace(core, "dc-op2"), new_namespace(core)
    objects = render_component(
        helm_bin, tmp_path_factory.mktemp("chart"), system, "operator",
        "operator.enabled=true", "operator.replicas=2",
    )  # fmt: skip
    with applied(kube_node_client, objects, system):

        def both() -> list[str] | None:
            found = _pods(core, system, OPERATOR)
            return found if len(found) == 2 else None

        pods = wait_for(both, 60, "the Deployment's two pods")
        for pod in pods:
            wait_pod_ready(core, system, pod)
        kube = load_conftest("packages/dynconf-k8s/tests/operator/conftest.py",
                             "dynconf_e2e_operator_conftest").Kube(kube_node_client)  # fmt: skip
        kube.await_lease(system, LEASE_NAME, timeout=60)
        handle = OperatorOnNode(kube, core, system, apps, consul_server, consul_at)
        handle.consul_class(apps)
        try:
            yield handle
        finally:
            for pod in _pods(core, system, OPERATOR):
                memory = working_set_mib(core, kube_node.name, system, pod)
                print(f"\nfaults restarts: operator {pod} {memory_note(memory, 128)}")
            core.delete_namespace(apps)
    core.delete_namespace(system)


def _document(gen: int, **extra: Any) -> str:
    return json.dumps({"gen": gen, **extra})


def _late(verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
    return {pod: v for pod, v in verdicts.items() if not v.fresh}


def _slowest(verdicts: dict[str, Verdict]) -> float:
    return max((v.took or 0.0) for v in verdicts.values())


def _csi_pod(name: str, endpoint: str, keys: list[str]) -> dict[str, Any]:
    """A pod with one inline CSI volume per key, each read by its own container ``read-<i>``
    (``app`` when there is one key)."""
    volumes, containers = [], []
    for i, key in enumerate(keys):
        mount = f"/config/d{i}"
        volumes.append(
            {
                "name": f"d{i}",
                "csi": {
                    "driver": DRIVER_NAME,
                    "readOnly": True,
                    "volumeAttributes": {
                        "source": "consul",
                        "endpoint": f"http://{endpoint}",
                        "key": key,
                        "path": "doc.json",
                        "watch-seconds": str(WATCH),
                    },
                },
            }
        )
        containers.append({
            "name": "app" if len(keys) == 1 else f"read-{i}", "image": BUSYBOX,
            "imagePullPolicy": "Never", "command": ["sh", "-c", reader(f"{mount}/doc.json")],
            "volumeMounts": [{"name": f"d{i}", "mountPath": mount, "readOnly": True}],
        })  # fmt: skip
    return {
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": containers, "volumes": volumes},
    }


def _delete_pods(core: Any, namespace: str, names: list[str]) -> None:
    """Delete the pods of ``names`` that exist (a leg that failed early made only some)."""
    for name in names:
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=1)
        except client.ApiException as error:
            if error.status != 404:
                raise
    for name in names:
        wait_pod_gone(core, namespace, name, timeout=120)


# ---------------------------------------------------------------------------- node agent
def test_a_killed_node_agent_keeps_fifty_volumes_and_resumes_their_watches(
    node_agent: NodeAgentOnNode, kube_node: KubeNode, kube_node_client: object
) -> None:
    began = time.monotonic()
    core, system = node_agent.core, node_agent.system
    storage = client.StorageV1Api(kube_node_client)
    label = uuid.uuid4().hex[:8]
    keys = [f"faults-restarts-{label}/doc-{i}.json" for i in range(DOCUMENTS_PER_POD)]
    pods = [f"volumes-{p:02d}" for p in range(VOLUME_PODS)]
    with node_disruption(exclusive=False), contextlib.ExitStack() as stack:
        namespace = new_namespace(core, "fr-node")
        stack.callback(core.delete_namespace, namespace)
        stack.callback(_delete_pods, core, namespace, pods)
        streams = streaming_core(core.api_client, stack)

        def put(i: int) -> Callable[[int], None]:
            return lambda gen: node_agent.consul.client.kv.put(keys[i], _document(gen, doc=i))

        checkers = [
            FileInvariants(streams, namespace, bound=BOUND, put=put(i), name=f"doc-{i}")
            for i in range(DOCUMENTS_PER_POD)
        ]
        for i, checker in enumerate(checkers):
            stack.callback(checker.close)
            put(i)(1)
        assert node_agent.gauges() == (0, 0), "the node agent serves volumes of another session"
        for pod in pods:
            core.create_namespaced_pod(namespace, _csi_pod(pod, node_agent.endpoint, keys))
        for pod in pods:
            wait_pod_ready(core, namespace, pod, timeout=300)
        ready = time.time()
        for i, checker in enumerate(checkers):
            checker.record_write(1, ready)
            for pod in pods:
                checker.observe(pod, f"read-{i}")
        for checker in checkers:
            assert not _late(checker.check())
        node_agent.wait_gauges((DOCUMENTS_PER_POD, DOCUMENTS_PER_POD * VOLUME_PODS))
        set_up = time.monotonic() - began

        killed = time.monotonic()
        kill_container(kube_node, core.read_namespaced_pod(node_agent.pod, system), "node-agent")
        for i in range(DOCUMENTS_PER_POD):
            put(i)(2)  # while it is down: the restarted watches must read it

        def back() -> bool:
            pod = core.read_namespaced_pod(node_agent.pod, system)
            (status,) = pod.status.container_statuses
            return bool(status.restart_count == 1 and is_ready(pod))

        wait_for(back, 120, "the node agent restarted once and Ready")
        serving = time.monotonic() - killed
        for checker in checkers:  # the bound counts from when it serves again
            checker.record_write(2, time.time())
        during = [checker.check() for checker in checkers]
        node_agent.wait_gauges((DOCUMENTS_PER_POD, DOCUMENTS_PER_POD * VOLUME_PODS))
        registered = csinode_drivers(storage, kube_node.name).get(DRIVER_NAME)

        for checker in checkers:
            checker.write()
        after = [checker.check() for checker in checkers]
        agent_pod = core.read_namespaced_pod(node_agent.pod, system)
        restarts = [s.restart_count for s in agent_pod.status.container_statuses]
        waiting = [s.state.waiting.reason for s in agent_pod.status.container_statuses
                   if s.state.waiting]  # fmt: skip

    print(
        f"\nfaults restarts: {VOLUME_PODS} pods with {DOCUMENTS_PER_POD * VOLUME_PODS} CSI "
        f"volumes Ready and observed in {set_up:.1f} s; the node agent SIGKILLed, Ready again "
        f"in {serving:.1f} s; the write made while it was down shown {max(map(_slowest, during)):.1f} "
        f"s after that, the next write in {max(map(_slowest, after)):.1f} s (slowest of 50); "
        f"leg {time.monotonic() - began:.0f} s"
    )
    assert not [late for verdicts in during if (late := _late(verdicts))]
    assert not [late for verdicts in after if (late := _late(verdicts))]
    assert registered == kube_node.name
    assert restarts == [1], pod_trouble(core, system, node_agent.pod)
    assert waiting == []
    node_agent.wait_gauges((0, 0), timeout=60)


# ---------------------------------------------------------------------------- operator
class TargetWrites:
    """Every write the API server made to one namespace's ConfigMaps named ``prefix…``: the
    events of a watch begun before the first, resumed from its last version until ``stop``."""

    def __init__(self, core: Any, namespace: str, prefix: str) -> None:
        self.core, self.namespace, self.prefix = core, namespace, prefix
        self.events: dict[str, list[tuple[str, str]]] = {}
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        listed = core.list_namespaced_config_map(namespace)
        self.version = listed.metadata.resource_version
        self.thread = threading.Thread(target=self._run, daemon=True, name="target-writes")
        self.thread.start()

    @property
    def written(self) -> int:
        """Targets written at least once so far."""
        with self.lock:
            return len(self.events)

    def caught_up(self, names: set[str]) -> bool:
        """Whether the watch has delivered a write of every one of ``names``."""
        with self.lock:
            return names <= set(self.events)

    def stop(self) -> dict[str, list[tuple[str, str]]]:
        self.stopping.set()
        self.thread.join(15)
        assert not self.errors, self.errors
        with self.lock:
            return dict(self.events)

    def _run(self) -> None:
        """Watch in 5 s stretches, each resumed from the last version seen (bookmarks keep it
        current while nothing is written); an ``ERROR`` event (the version is gone) ends it:
        events may have been missed, which ``stop`` reports."""
        while not self.stopping.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(
                    self.core.list_namespaced_config_map, self.namespace,
                    resource_version=self.version, timeout_seconds=5, allow_watch_bookmarks=True,
                ):  # fmt: skip
                    if event["type"] == "ERROR":
                        self.errors.append(str(event["raw_object"])[:300])
                        return
                    meta = event["object"].metadata
                    self.version = meta.resource_version
                    if event["type"] in ("ADDED", "MODIFIED") and meta.name.startswith(self.prefix):
                        with self.lock:
                            self.events.setdefault(meta.name, []).append(
                                (event["type"], meta.resource_version)
                            )
                    if self.stopping.is_set():
                        stream.stop()
            except Exception:  # a broken stream: resumed from the last version
                self.stopping.wait(0.5)


def _ready_renders(custom: Any, namespace: str) -> set[str]:
    listed = json.loads(
        custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[RENDER_KIND], _preload_content=False
        ).data
    )
    return {
        item["metadata"]["name"]
        for item in listed["items"]
        for c in (item.get("status") or {}).get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True" and c["reason"] == "Rendered"
    }


def test_a_killed_operator_leader_hands_five_hundred_renders_over_without_a_lost_or_repeated_write(
    operator_pair: OperatorOnNode, kube_node: KubeNode
) -> None:
    began = time.monotonic()
    op, core = operator_pair, operator_pair.core
    leases = client.CoordinationV1Api(core.api_client)
    label = uuid.uuid4().hex[:8]
    names = [f"t-{i:03d}" for i in range(RENDERS)]
    with node_disruption(exclusive=False), contextlib.ExitStack() as stack:
        namespace = new_namespace(core, "fr-op")
        stack.callback(_delete_namespace, core, namespace)
        op.consul_class(namespace)
        for i in range(RENDERS):
            op.consul.client.kv.put(f"faults-restarts-{label}/{i}.json", json.dumps({"render": i}))
        writes = TargetWrites(core, namespace, "t-")
        stack.callback(writes.stopping.set)

        def create(i: int) -> None:
            op.kube.create(RENDER_KIND, namespace, names[i], {
                "class": "consul", "key": f"faults-restarts-{label}/{i}.json",
                "intervalSeconds": 60, "target": {"configMap": names[i], "file": "app.json"},
            })  # fmt: skip

        created = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(RENDERS)))
        creating = time.monotonic() - created
        wait_for(lambda: writes.written >= KILL_AT, 300, f"{KILL_AT} targets written")
        before = leases.read_namespaced_lease(LEASE_NAME, op.system).spec
        leader = before.holder_identity
        (survivor,) = [p for p in _pods(core, op.system, OPERATOR) if p != leader]
        unkilled = _restart_counts(core, [op.system])

        killed = time.monotonic()
        kill_container(kube_node, core.read_namespaced_pod(leader, op.system), "operator")
        core.delete_namespaced_pod(leader, op.system, grace_period_seconds=1)
        at_kill = writes.written
        last_renew = leases.read_namespaced_lease(LEASE_NAME, op.system).spec.renew_time

        def taken() -> Any:
            spec = leases.read_namespaced_lease(LEASE_NAME, op.system).spec
            if spec.holder_identity == leader:
                assert spec.renew_time == last_renew, "the killed leader renewed its Lease"
                return None
            return spec

        term = float(before.lease_duration_seconds)
        after = wait_for(taken, term + FOLLOWER_RETRY + 30, "another replica holding the Lease")
        failover = time.monotonic() - killed
        elections = _election_log(core, op.system)
        replicas = _pods(core, op.system, OPERATOR)
        wait_for(lambda: len(_ready_renders(op.kube.custom, namespace)) == RENDERS, 600,
                 f"all {RENDERS} Renders Ready")  # fmt: skip
        all_ready = time.monotonic() - created
        targets = {
            cm.metadata.name: cm.data
            for cm in core.list_namespaced_config_map(namespace).items
            if cm.metadata.name.startswith("t-")
        }
        # the watch delivers a moment after the list shows: let it catch up, then a little
        # more, so a write repeated just after the last Ready is counted too
        wait_for(lambda: writes.caught_up(set(targets)), 30, "the watch to see every target")
        time.sleep(2 * FOLLOWER_RETRY)
        events = writes.stop()
        counters = pod_metrics(
            core, op.system, survivor, OPERATOR_METRICS, "dynamic_config_operator_"
        )
        survived = _restart_counts(core, [op.system])

    missing = sorted(set(names) - set(targets))
    wrong = [
        name
        for i, name in enumerate(names)
        if name in targets and _rendered(targets[name]) != {"render": i}
    ]
    repeated = {n: e for n, e in events.items() if len(e) != 1}
    unwatched = sorted(set(targets) - set(events))
    print(
        f"\nfaults restarts: {RENDERS} Renders created in {creating:.1f} s; leader {leader} "
        f"killed after {at_kill} targets; {after.holder_identity} ("
        f"{'the surviving replica' if after.holder_identity == survivor else 'its replacement'}) "
        f"took the Lease {failover:.1f} s after the kill (term {term:g} s, follower retry "
        f"{FOLLOWER_RETRY:g} s); all Ready "
        f"{all_ready:.1f} s after the first create; target writes {sum(map(len, events.values()))} "
        f"for {len(targets)} targets; the new leader's counters: renders "
        f"{counters.get('dynamic_config_operator_renders_total')}, reconcile failures "
        f"{counters.get('dynamic_config_operator_reconcile_failures_total')}; leg "
        f"{time.monotonic() - began:.0f} s"
    )
    assert set(unkilled.values()) == {0}, (
        f"operator containers restarted before the kill: {unkilled}"
    )
    assert survived[f"{op.system}/{survivor}/operator"] == 0, survived
    assert after.holder_identity in replicas, (after.holder_identity, replicas)
    assert after.lease_transitions == (before.lease_transitions or 0) + 1
    assert failover <= term + FOLLOWER_RETRY + 3, (
        f"the Lease changed hands {failover:.1f} s after the kill:\n{elections}"
    )
    assert missing == [], f"{len(missing)} targets never written: {missing[:10]}"
    assert wrong == [], f"{len(wrong)} targets hold another document: {wrong[:10]}"
    assert unwatched == []
    assert repeated == {}, (
        f"{len(repeated)} targets written more than once: {list(repeated.items())[:5]}"
    )


def _election_log(core: Any, namespace: str) -> str:
    """Every operator pod's log lines about the Lease, for the report."""
    lines = []
    for pod in _pods(core, namespace, OPERATOR):
        text = core.read_namespaced_pod_log(pod, namespace, _preload_content=False).data.decode()
        lines += [
            f"{pod}: {line}" for line in text.splitlines() if "lease" in line or "leader" in line
        ]
    return "\n".join(lines)


def _rendered(data: dict[str, str] | None) -> Any:
    """The document a target's ``app.json`` holds (None when it has none)."""
    text = (data or {}).get("app.json")
    return json.loads(text) if text else None


def _delete_namespace(core: Any, name: str, timeout: float = 300) -> None:
    """Delete ``name`` and wait until it is gone (its Renders, targets and Events with it)."""
    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except client.ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for(gone, timeout, f"namespace {name} deleted")


# ---------------------------------------------------------------------------- control plane
def _restart_counts(core: Any, namespaces: list[str]) -> dict[str, int]:
    """Every container's restart count in ``namespaces`` (init containers too), by
    ``namespace/pod/container``."""
    return {
        f"{ns}/{pod.metadata.name}/{name}": status.restart_count
        for ns in namespaces
        for pod in core.list_namespaced_pod(ns).items
        for name, status in statuses(pod).items()
    }


def _previous_log(core: Any, name: str, lines: int = 15) -> str:
    """The last lines the previous run of container ``namespace/pod/container`` logged."""
    namespace, pod, container = name.split("/")
    try:
        text = core.read_namespaced_pod_log(
            pod, namespace, container=container, previous=True, _preload_content=False
        ).data.decode(errors="replace")
    except client.ApiException as error:
        return f"(no log: {error.status}; {_last_exit(core, name)})"
    return "\n".join(text.splitlines()[-lines:])


def _last_exit(core: Any, name: str) -> str:
    """How the previous run of container ``namespace/pod/container`` ended, from its status:
    what is left to read when the restarted kubelet no longer serves that run's log."""
    namespace, pod, container = name.split("/")
    status = statuses(core.read_namespaced_pod(pod, namespace)).get(container)
    ended = status.last_state.terminated if status and status.last_state else None
    if ended is None:
        return "no last state"
    return f"exit {ended.exit_code}, reason {ended.reason}"


def _crash_looping(core: Any, namespaces: list[str]) -> list[str]:
    return [
        f"{ns}/{pod.metadata.name}/{name}"
        for ns in namespaces
        for pod in core.list_namespaced_pod(ns).items
        for name, status in statuses(pod).items()
        if status.state.waiting and status.state.waiting.reason == "CrashLoopBackOff"
    ]


def _all_ready(core: Any, namespaces: list[str], timeout: float = 180) -> None:
    for ns in namespaces:
        for pod in core.list_namespaced_pod(ns).items:
            if pod.metadata.deletion_timestamp is None:
                wait_pod_ready(core, ns, pod.metadata.name, timeout)


def _heartbeat_since(core: Any, node: str, since: float) -> bool:
    """The kubelet posted the Node Ready after ``since`` (unix seconds; the heartbeat is whole
    seconds, so one in the same second as ``since`` does not count)."""
    for condition in core.read_node(node).status.conditions or []:
        if condition.type == "Ready":
            return bool(
                condition.status == "True" and condition.last_heartbeat_time.timestamp() > since
            )
    return False


def test_a_restarted_apiserver_and_kubelet_leave_every_component_serving(
    chart_release: Release,
    node_agent: NodeAgentOnNode,
    operator_pair: OperatorOnNode,
    kube_node: KubeNode,
) -> None:
    began = time.monotonic()
    core, op = chart_release.core, operator_pair
    label = uuid.uuid4().hex[:8]
    agent_key, csi_key = f"faults-restarts-{label}/agent.json", f"faults-restarts-{label}/csi.json"
    render_keys = [f"faults-restarts-{label}/render-{n}.json" for n in (1, 2)]
    with node_disruption(exclusive=True), contextlib.ExitStack() as stack:
        ws = Workspace(core, chart_release.injecting_namespace())
        csi = new_namespace(core, "fr-plane")
        stack.callback(core.delete_namespace, csi)
        stack.callback(_delete_pods, core, csi, ["csi-0", "csi-1"])
        streams = streaming_core(core.api_client, stack)
        consul = node_agent.consul.client

        def put(key: str) -> Callable[[int], None]:
            return lambda gen: consul.kv.put(key, _document(gen))

        agent = FileInvariants(streams, ws.namespace, bound=BOUND, put=put(agent_key), name="agent")
        volume = FileInvariants(streams, csi, bound=BOUND, put=put(csi_key), name="csi")
        stack.callback(agent.close)
        stack.callback(volume.close)
        put(agent_key)(1)
        put(csi_key)(1)
        for n, key in enumerate(render_keys, 1):
            consul.kv.put(key, json.dumps({"render": n}))
        injected = {annotation(k): v for k, v in {
            "inject": "true", "source": "consul", "endpoint": f"http://{op.endpoint}",
            "key": agent_key, "path": "/config/doc.json", "mode": "both",
            "watch-seconds": str(WATCH),
        }.items()}  # fmt: skip

        def run_agent_pod(name: str) -> None:
            ws.create_pod(name, injected, ready_file="/config/doc.json",
                          command=reader("/config/doc.json"))  # fmt: skip
            ws.wait_ready(name)

        def run_csi_pod(name: str) -> None:
            core.create_namespaced_pod(csi, _csi_pod(name, node_agent.endpoint, [csi_key]))
            wait_pod_ready(core, csi, name)

        run_agent_pod("agent-0")
        run_csi_pod("csi-0")
        op.render(op.apps, "plane", render_keys[0], {"configMap": "plane", "file": "app.json"})
        op.kube.await_configmap(op.apps, "plane", lambda c: '"render": 1' in str(c.get("data")))
        ready = time.time()
        for checker, pod in ((agent, "agent-0"), (volume, "csi-0")):
            checker.record_write(1, ready)
            checker.observe(pod)
            assert not _late(checker.check())
        components = [chart_release.namespace, node_agent.system, op.system]
        watched = [*components, ws.namespace, csi]
        restarts_before = _restart_counts(core, watched)
        set_up = time.monotonic() - began

        apiserver = restart_component(
            "node-apiserver", kube_node, ready=lambda _: kube_node.plane.ready(), timeout=180
        )
        kubelet = restart_component(
            "node-kubelet", kube_node, ready=lambda gone: _heartbeat_since(core, kube_node.name, gone),
            timeout=180,
        )  # fmt: skip
        recovering = time.monotonic()
        _all_ready(core, watched)
        all_ready = time.monotonic() - recovering

        took = chart_release.await_injection(ws.namespace)
        run_agent_pod("agent-1")
        run_csi_pod("csi-1")
        agent.observe("agent-1")
        volume.observe("csi-1")
        agent.write()
        volume.write()
        delivered = {"agent": agent.check(), "csi": volume.check()}
        changed = time.monotonic()
        op.kube.patch_spec(RENDER_KIND, op.apps, "plane", {"key": render_keys[1]})
        op.kube.await_configmap(op.apps, "plane", lambda c: '"render": 2' in str(c.get("data")),
                                timeout=60)  # fmt: skip
        followed = time.monotonic() - changed
        restarts_after = _restart_counts(core, watched)
        looping = _crash_looping(core, watched)
        term = float(
            client.CoordinationV1Api(core.api_client)
            .read_namespaced_lease(LEASE_NAME, op.system)
            .spec.lease_duration_seconds
        )
        story = {
            name: _previous_log(core, name)
            for name, count in restarts_after.items()
            if count != restarts_before.get(name, 0)
        }

    moved = {
        name: (restarts_before.get(name, 0), count)
        for name, count in restarts_after.items()
        if count != restarts_before.get(name, 0)
    }
    outage = apiserver.stopped + apiserver.ready  # it stops listening at the SIGTERM
    lost = {
        name
        for name, (was, now) in moved.items()
        if name.startswith(f"{op.system}/")
        and now == was + 1
        # the log says why; when the restarted kubelet no longer serves it, the exit code
        # does (a lost lease ends the operator with 1, a signal or a crash otherwise)
        and (LOST_MESSAGE in story[name] or story[name].endswith("exit 1, reason Error)"))
    }
    print(
        f"\nfaults restarts: set up {set_up:.1f} s; kube-apiserver stopped in "
        f"{apiserver.stopped:.1f} s, ready {apiserver.ready:.1f} s after its start (the API "
        f"away {outage:.1f} s; the operator's term {term:g} s; restarted for a lost Lease: "
        f"{sorted(lost)}); kubelet "
        f"stopped in {kubelet.stopped:.1f} s, heartbeat {kubelet.ready:.1f} s after its start; "
        f"every pod Ready again {all_ready:.1f} s later; the webhook injected {took:.1f} s "
        f"after that; a write reached the agent pods in "
        f"{_slowest(delivered['agent']):.1f} s, the CSI pods in {_slowest(delivered['csi']):.1f} "
        f"s; the operator followed a Render change in {followed:.1f} s; leg "
        f"{time.monotonic() - began:.0f} s"
    )
    assert not _late(delivered["agent"]), delivered["agent"]
    assert not _late(delivered["csi"]), delivered["csi"]
    # a leader that cannot renew for a whole term ends itself (election.py), so an outage
    # that long restarts the Lease holder once; nothing else may restart, ever
    allowed = lost if outage >= term - LEADER_RENEW and len(lost) <= 1 else set()
    unexplained = {name: counts for name, counts in moved.items() if name not in allowed}
    assert unexplained == {}, f"containers restarted across the restarts: {moved}\n" + "\n".join(
        f"--- {name}, before its restart ---\n{text}" for name, text in story.items()
    )
    assert looping == []
