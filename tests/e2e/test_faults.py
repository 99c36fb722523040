"""The fault ladder on the kubelet node: what a store's faults do to the files in real pods.

Every pod here is an injected pod (the chart's webhook, ``mode: both``, ``watch-seconds: 5``)
whose busybox ``app`` container is a reader (``faults_support.reader``) printing the published
file every 200 ms; every leg holds its pods to the one checker
(``faults_support.FileInvariants``): each write shows in every pod's file within ``BOUND``
seconds or the pod's ``staleness_seconds`` says it is stale, and no reader ever sees the file
missing, empty, torn or going back a generation. A store's path is a ``tests/fixtures/relay.py``
relay on this host, exposed to the pods at the node address (``kube_node.expose``), so the
store itself stays up and can be written while its pods cannot reach it.

The legs, all pods started at once (one pod start for the module):

- **outage** (consul, 3 pods; redis, 2 pods): the relays are cut when the pods are Ready and
  stay cut for ``OUTAGE`` seconds, which pass while the other legs run (their tests come
  first); a write during the outage is not shown, every pod keeps its last good file and
  reports its staleness past ``2 * WATCH``; once the relays are restored a new write shows in
  every pod within the bound;
- **stream** (consul, redis, etcd, a pod each): the relay stalls every open connection
  (new ones pass): a write after the stall shows within the bound; then it black-holes every
  connection: the file is kept while ``staleness_seconds`` rises; lifted, a write shows again;
- **size** (redis, a pod each for two documents): a document larger than the volume's
  ``sizeLimit`` (16Mi, what the webhook sets for the ``dynamic-config`` emptyDir) is refused —
  by the default 8 MiB ``max-document-bytes`` in one pod, by the full volume in the other,
  whose ceiling is raised past the volume — the last good file is kept and the failure is
  counted (``render_failures_total``) and logged (``render_failed``); a following normal
  write shows within the bound.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.faults_support import (
    FileInvariants,
    Verdict,
    agent_metrics,
    broken,
    parse,
    reader,
    streaming_core,
)
from tests.e2e.stores_support import AGENT_PREFIX, Workspace, annotations, workspace
from tests.fixtures.node import KubeNode
from tests.fixtures.relay import Relay, relay_factory

pytestmark = pytest.mark.e2e

__all__ = ["workspace"]  # fixtures, used by name

PATH = "/config/doc.json"
WATCH = 5
"""``watch-seconds`` of every pod: a push watch is confirmed by a read at least this often."""
SLACK = 8
BOUND = 2 * WATCH + SLACK
"""Seconds a pod has to show a write (2 * watch-seconds, plus slack for a loaded node)."""
OUTAGE = 300
"""Seconds the outage leg's relays stay cut."""
SIZE_LIMIT = 16 * 2**20
"""The ``dynamic-config`` volume's ``sizeLimit`` (the webhook's 16Mi)."""
OVERSIZE = SIZE_LIMIT + 2**20
RAISED_CEILING = 64 * 2**20
"""``max-document-bytes`` of the pod whose write meets the full volume."""
VOLUME_LEG_MEMORY = "384Mi"
"""The memory limit of the pod whose write meets the full volume. An agent rendering a 17 MiB
document over and over (a failed write is tried again every interval) peaks near 230 MB
(VmHWM, the same agent and document outside the node), which a 256Mi limit held only on
some runs; this leg is about the full volume, not about memory."""
FAILURES = "dynamic_config_agent_render_failures_total"


@dataclass
class Leg:
    """One document on one store (at ``key``), its pods, and the relay they reach it through
    (None: they reach the store directly)."""

    checker: FileInvariants
    key: str
    pods: list[str]
    relay: Relay | None


@dataclass
class Ladder:
    ws: Workspace
    legs: dict[str, Leg]
    outage_began: float = 0.0
    """``time.monotonic()`` when the outage leg's relays were cut."""
    timings: dict[str, float] = field(default_factory=dict)

    def of(self, prefix: str) -> dict[str, Leg]:
        return {name: leg for name, leg in self.legs.items() if name.startswith(prefix)}


def document(store: str, gen: int, **extra: Any) -> str:
    return json.dumps({"gen": gen, "store": store, **extra})


class Builder:
    """Makes each leg's relay, document and pods."""

    def __init__(
        self, ws: Workspace, node: KubeNode, stack: contextlib.ExitStack, relay: Any
    ) -> None:
        self.ws, self.node, self.stack, self.make_relay = ws, node, stack, relay
        self.core = streaming_core(ws.core.api_client, stack)
        self.label = uuid.uuid4().hex[:8]
        self.legs: dict[str, Leg] = {}
        self.exposed: dict[int, str] = {}

    def reach(self, port: int, *, relayed: bool) -> tuple[str, Relay | None]:
        """``host:port`` at which pods reach a server on 127.0.0.1:``port`` (through a relay
        of its own, or directly: one exposure per server)."""
        if relayed:
            relay = self.make_relay(port)
            return self.stack.enter_context(self.node.expose(relay.port)), relay
        if port not in self.exposed:
            self.exposed[port] = self.stack.enter_context(self.node.expose(port))
        return self.exposed[port], None

    def leg(
        self,
        name: str,
        store: str,
        put: Callable[[str, str], None],
        port: int,
        pods: int,
        *,
        relayed: bool = True,
        **values: str,
    ) -> None:
        """``pods`` reader pods named ``<name>-<i>`` on one document of ``store``, written by
        ``put(key, body)``; ``values`` are more annotations (``{at}`` in them: where pods
        reach the store)."""
        key = f"faults-{self.label}/{name}.json"
        at, relay = self.reach(port, relayed=relayed)

        def put_gen(gen: int) -> None:
            put(key, document(store, gen))

        checker = FileInvariants(self.core, self.ws.namespace, bound=BOUND, put=put_gen,
                                 name=name)  # fmt: skip
        self.stack.callback(checker.close)
        put_gen(1)  # recorded once the pods are Ready: their start is not the bound's
        leg = Leg(checker, key, [f"{name}-{i}" for i in range(pods)], relay)
        base = {"inject": "true", "path": PATH, "watch_seconds": str(WATCH), "mode": "both",
                "source": store, "key": key}  # fmt: skip
        base.update({k: v.format(at=at) for k, v in values.items()})
        for pod in leg.pods:
            self.ws.create_pod(pod, annotations(**base), ready_file=PATH, command=reader(PATH))
        self.legs[name] = leg


@pytest.fixture(scope="module")
def ladder(
    workspace: Workspace,
    kube_node: KubeNode,
    consul_server: Any,
    redis_server: Any,
    etcd_server: Any,
) -> Iterator[Ladder]:
    """Every leg's pods, Ready and observed, and the outage begun (its relays cut)."""
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        b = Builder(workspace, kube_node, stack, stack.enter_context(relay_factory()))

        def consul(key: str, body: str) -> None:
            consul_server.client.kv.put(key, body)

        def redis(key: str, body: str) -> None:
            redis_server.client.set(key, body)

        def etcd(key: str, body: str) -> None:
            etcd_server.client.put(key, body)

        b.leg("outage-consul", "consul", consul, consul_server.port, 3, endpoint="http://{at}")
        b.leg("outage-redis", "redis", redis, redis_server.port, 2, endpoint="redis://{at}/0")
        b.leg("stream-consul", "consul", consul, consul_server.port, 1, endpoint="http://{at}")
        b.leg("stream-redis", "redis", redis, redis_server.port, 1, endpoint="redis://{at}/0")
        b.leg("stream-etcd", "etcd", etcd, etcd_server.port, 1, endpoint="http://{at}")
        b.leg("size-ceiling", "redis", redis, redis_server.port, 1, relayed=False,
              endpoint="redis://{at}/0")  # fmt: skip
        b.leg("size-volume", "redis", redis, redis_server.port, 1, relayed=False,
              endpoint="redis://{at}/0", max_document_bytes=str(RAISED_CEILING),
              agent_memory_limit=VOLUME_LEG_MEMORY)  # fmt: skip
        ladder = Ladder(workspace, b.legs)
        for leg in b.legs.values():
            for pod in leg.pods:
                workspace.wait_ready(pod)
        ready = time.time()
        for leg in b.legs.values():
            leg.checker.record_write(1, ready)
            for pod in leg.pods:
                leg.checker.observe(pod)
        for leg in b.legs.values():
            leg.checker.check()
        ladder.timings["setup"] = time.monotonic() - began
        print(f"\nfaults: {sum(len(leg.pods) for leg in b.legs.values())} pods Ready and "
              f"observed {ladder.timings['setup']:.1f} s after the fixture began")  # fmt: skip
        for leg in ladder.of("outage-").values():
            assert leg.relay is not None
            leg.relay.cut()
        ladder.outage_began = time.monotonic()
        yield ladder
        print("\nfaults: " + ", ".join(f"{k} {v:.1f} s" for k, v in ladder.timings.items()))


def _fresh(verdicts: dict[str, Verdict]) -> str:
    return ", ".join(f"{pod} {v.took:.1f} s" for pod, v in verdicts.items() if v.took is not None)


def _assert_converged(name: str, verdicts: dict[str, Verdict]) -> None:
    late = {pod: v for pod, v in verdicts.items() if not v.fresh}
    assert not late, f"{name}: not within {BOUND} s: {late}"


# ---------------------------------------------------------------------------- the checker
def test_the_checker_flags_a_missing_empty_torn_or_backwards_file() -> None:
    lines = [
        'doc {  "gen": 1}', 'doc {  "gen": 2}', "missing", "doc ", 'doc {  "gen": 3, "pad',
        "big 70000", 'doc {  "gen": 1}', 'doc {  "gen": 2}', 'doc {  "gen": 4}',
    ]  # fmt: skip
    sightings = [parse(f"2026-12-07T06:40:{i:02d}.000000001Z {t}") for i, t in enumerate(lines)]

    found = broken([s for s in sightings if s is not None])

    assert [problem.partition(": ")[2] for problem in found] == [
        "the file is missing",
        "the file is empty",
        'the file is not a whole document: \'{  "gen": 3, "pad\'',
        "the file holds 70000 bytes (past 65536)",
        "gen 1 after gen 2 (at 06:40:01.000)",
    ]


def test_the_checker_reads_the_runtimes_stamp_in_any_zone() -> None:
    """The kubelet passes on the runtime's stamp, in the runtime's local zone."""
    utc = parse('2026-12-07T06:40:00.5Z doc {"gen": 1}')
    ahead = parse('2026-12-07T07:40:00.500000001+01:00 doc {"gen": 1}')
    behind = parse('2026-12-07T01:40:00-05:00 doc {"gen": 1}')
    assert utc is not None and ahead is not None and behind is not None
    assert utc.at == pytest.approx(ahead.at) == pytest.approx(behind.at + 0.5)
    assert parse("12:00:00 doc {}") is None  # not a stamp: not the reader's line


# ---------------------------------------------------------------------------- stream
def test_a_change_after_a_stall_reaches_every_pod_within_the_bound(ladder: Ladder) -> None:
    began = time.monotonic()
    legs = ladder.of("stream-")
    for leg in legs.values():
        assert leg.relay is not None
        leg.relay.stall()

    for leg in legs.values():
        leg.checker.write()
    verdicts = {name: leg.checker.check() for name, leg in legs.items()}

    for name, found in verdicts.items():
        print(f"\nfaults: after a stall, {name}: {_fresh(found)}")
        _assert_converged(name, found)
    ladder.timings["stall"] = time.monotonic() - began


def test_a_full_blackhole_keeps_the_file_while_staleness_rises(ladder: Ladder) -> None:
    began = time.monotonic()
    legs = ladder.of("stream-")
    for leg in legs.values():
        assert leg.relay is not None
        leg.relay.blackhole()
    before = {pod: leg.checker.staleness(pod) for leg in legs.values() for pod in leg.pods}
    kept = {pod: leg.checker.shown(pod) for leg in legs.values() for pod in leg.pods}

    for leg in legs.values():
        leg.checker.write()
    verdicts = {pod: v for leg in legs.values() for pod, v in leg.checker.check().items()}

    assert {pod: v.last_gen for pod, v in verdicts.items()} == kept
    rose = {pod: (before[pod], v.staleness) for pod, v in verdicts.items()}
    print(f"\nfaults: staleness during the blackhole (start, after {BOUND} s): {rose}")
    assert all(
        start is not None and now is not None and now >= BOUND and now > start
        for start, now in rose.values()
    ), rose
    ladder.timings["blackhole"] = time.monotonic() - began


def _restore_and_converge(ladder: Ladder, prefix: str, after: str) -> None:
    """Restore the relays of the legs named ``prefix…``, write once more, and require every
    pod of them to show that write within the bound."""
    legs = ladder.of(prefix)
    for leg in legs.values():
        assert leg.relay is not None
        leg.relay.restore()
    for leg in legs.values():
        leg.checker.write()
    verdicts = {name: leg.checker.check() for name, leg in legs.items()}
    for name, found in verdicts.items():
        print(f"\nfaults: after {after}, {name}: {_fresh(found)}")
        _assert_converged(name, found)


def test_a_change_after_the_blackhole_lifts_reaches_every_pod(ladder: Ladder) -> None:
    began = time.monotonic()
    _restore_and_converge(ladder, "stream-", "the blackhole lifted")
    ladder.timings["lifted"] = time.monotonic() - began


# ---------------------------------------------------------------------------- size
class AgentKilled(AssertionError):
    """An injected container of the pod was killed or restarted: a document past the
    ceiling must be refused by its length, never read whole into a 64Mi agent first."""


REFUSALS = [
    pytest.param("size-ceiling", f"past the {8 * 2**20}-byte ceiling", id="ceiling"),
    pytest.param("size-volume", "No space left on device", id="volume"),
]  # fmt: skip
"""Each size pod and what its agent logs when it refuses the document: the default ceiling
(8 MiB), or the full volume (its ceiling raised to 64 MiB, its memory limit to
:data:`VOLUME_LEG_MEMORY`)."""


@pytest.mark.parametrize(("name", "reason"), REFUSALS)
def test_a_document_past_the_volume_size_limit_is_refused_and_the_file_kept(
    ladder: Ladder, redis_server: Any, name: str, reason: str
) -> None:
    began = time.monotonic()
    leg = ladder.legs[name]
    (pod,) = leg.pods
    kept = leg.checker.shown(pod)
    failed = _failures(ladder, pod)
    body = document("redis", leg.checker.writes[-1][0] + 1, pad="x" * OVERSIZE)
    assert len(body) > SIZE_LIMIT

    redis_server.client.set(leg.key, body)  # not a write the pod is to show: not recorded

    counted = _await_failure(ladder, pod, failed)
    time.sleep(2 * WATCH)  # the file as it stands after the refusal and its retries
    verdict = leg.checker.check()[pod]
    log = ladder.ws.log(pod, f"{AGENT_PREFIX}agent")
    assert verdict.last_gen == kept
    assert reason in log, log[-2000:]
    _assert_alive(ladder, pod)
    print(f"\nfaults: {name}: {len(body)} bytes refused, render_failures_total {failed} -> "
          f"{counted}, the file kept at gen {kept}")  # fmt: skip
    ladder.timings[f"{name} refused"] = time.monotonic() - began


@pytest.mark.parametrize(
    "name",
    [pytest.param("size-ceiling", id="ceiling"), pytest.param("size-volume", id="volume")],
)  # fmt: skip
def test_a_normal_write_after_the_oversize_document_converges(ladder: Ladder, name: str) -> None:
    began = time.monotonic()
    leg = ladder.legs[name]
    (pod,) = leg.pods

    leg.checker.write(leg.checker.writes[-1][0] + 2)  # past the refused document's gen
    verdicts = leg.checker.check()

    print(f"\nfaults: after the oversize document, {name}: {_fresh(verdicts)}")
    _assert_alive(ladder, pod)  # a killed agent's convergence is its restart's luck
    _assert_converged(name, verdicts)
    settled = _failures(ladder, pod)
    time.sleep(2 * WATCH)
    assert _failures(ladder, pod) == settled, "the refused document is still being retried"
    ladder.timings[f"{name} recovered"] = time.monotonic() - began


def _await_failure(ladder: Ladder, pod: str, before: float | None) -> float:
    """``render_failures_total`` of ``pod`` once it has counted a new failure."""
    deadline = time.monotonic() + BOUND
    while True:
        now = _failures(ladder, pod)
        if now is not None and before is not None and now > before:
            return now
        _assert_alive(ladder, pod)
        if time.monotonic() > deadline:
            raise AssertionError(f"{pod}: no failure counted within {BOUND} s: {before} -> {now}")
        time.sleep(1)


def _assert_alive(ladder: Ladder, pod: str) -> None:
    """No injected container of ``pod`` was killed or restarted (else :class:`AgentKilled`)."""
    restarts = {
        c: n for c, n in ladder.ws.restarts(pod).items() if n and c.startswith(AGENT_PREFIX)
    }
    terminations = ladder.ws.agent_terminations(pod)
    if restarts or terminations:
        told = {}
        for container in {**restarts, **terminations}:
            try:
                told[container] = ladder.ws.log(pod, container, previous=True)[-1500:]
            except client.ApiException as error:
                told[container] = f"(no previous log: {error.status})"
        raise AgentKilled(
            f"{pod}: restarted {restarts}, terminated {terminations}; the killed run's log: {told}"
        )


def _failures(ladder: Ladder, pod: str) -> float | None:
    try:
        return agent_metrics(ladder.ws.core, ladder.ws.namespace, pod)[FAILURES]
    except client.ApiException:
        return None


# ---------------------------------------------------------------------------- outage
def test_a_store_outage_keeps_the_last_file_and_reports_staleness(ladder: Ladder) -> None:
    """The outage began when the pods were Ready; it lasts ``OUTAGE`` seconds in all."""
    began = time.monotonic()
    legs = ladder.of("outage-")
    kept = {pod: leg.checker.shown(pod) for leg in legs.values() for pod in leg.pods}

    for leg in legs.values():
        leg.checker.write()
    early = {pod: v for leg in legs.values() for pod, v in leg.checker.check().items()}
    time.sleep(max(0.0, ladder.outage_began + OUTAGE - time.monotonic()))
    late = {pod: v for leg in legs.values() for pod, v in leg.checker.check().items()}

    lasted = time.monotonic() - ladder.outage_began
    assert {pod: v.last_gen for pod, v in late.items()} == kept
    rose = {pod: (early[pod].staleness, late[pod].staleness) for pod in late}
    print(f"\nfaults: outage of {lasted:.0f} s, staleness (after the write, at the end): {rose}")
    assert all(not v.fresh for v in late.values())
    assert all(
        first is not None
        and last is not None
        and 2 * WATCH < first < last
        and last >= lasted - BOUND
        for first, last in rose.values()
    ), rose
    for pod in late:
        _assert_alive(ladder, pod)
    ladder.timings["outage (beside the legs before it)"] = lasted
    ladder.timings["outage test"] = time.monotonic() - began


def test_after_the_outage_a_write_reaches_every_pod_within_the_bound(ladder: Ladder) -> None:
    began = time.monotonic()
    _restore_and_converge(ladder, "outage-", "the outage")
    ladder.timings["after outage"] = time.monotonic() - began
