"""Leg 6 of the end-to-end ladder (issue 15): store put → new value seen inside the app container.

One injected pod per push store (consul, etcd, redis, nats, config-server), each with
``watch-seconds: 300``, so no poll can deliver a change inside the measurement: only the
store's own watch does.  20 rounds per store, 0.6 s apart (longer than ``WATCH_FLOOR``, the
spacing a Consul watch keeps after an answer that brought nothing new, so no round waits on
it); the five stores run their rounds at once.

How it is measured: the app container (the agent image's python, a script from a ConfigMap)
stats the rendered file every 2 ms and, when the file is replaced (the agent renames a new
file into place), prints ``seen <CLOCK_REALTIME> <round>`` to its log.  The container shares
the machine's clock, so the latency of a round is that timestamp minus the test's clock just
before the put.  No exec is involved: the test learns of the line through the apiserver's log
stream, and how long that takes is not part of the figure; what remains in it beyond the
agent's own work is the put's round trip to the store and up to 2 ms of polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.stores_support import (
    Workspace,
    annotations,
    load_conftest,
    workspace,
)
from tests.fixtures.node import KubeNode, ProjectImage

pytestmark = pytest.mark.e2e

__all__ = ["workspace"]  # fixtures, used by name

_configserver_support = load_conftest(
    "packages/dynconf-store-configserver/tests/conftest.py", "dynconf_e2e_configserver"
)

ROUNDS = 20
GAP = 0.6
"""Seconds between one round's sighting and the next put (over ``WATCH_FLOOR``)."""
PATH = "/config/rendered.toml"
SEED_CEILING = 3.0
"""The seed's p95 ceiling, seconds; our target is 1 s."""
TARGET = 1.0

WATCHER = """\
import os, re, sys, time
path, last = sys.argv[1], None
while True:
    try:
        info = os.stat(path)
        mark = (info.st_ino, info.st_mtime_ns, info.st_size)
    except FileNotFoundError:
        mark = None
    if mark != last:
        now = time.time()
        last = mark
        try:
            with open(path) as handle:
                found = re.search(r"round = (\\d+)", handle.read())
        except FileNotFoundError:
            found = None
        if found:
            print(f"seen {now:.6f} {found.group(1)}", flush=True)
    time.sleep(0.002)
"""
"""The app: when the rendered file changes, print the time and the round it now holds."""


@dataclass
class Timed:
    store: str
    put: Callable[[int], None]
    took: list[float] = field(default_factory=list)


def document(gen: int) -> str:
    return json.dumps({"round": gen})


class Pods:
    def __init__(self, ws: Workspace, node: KubeNode, image: str, stack: contextlib.ExitStack):
        self.ws, self.node, self.image, self.stack = ws, node, image, stack
        self.label = uuid.uuid4().hex[:8]
        self.timed: dict[str, Timed] = {}

    def reach(self, port: int) -> str:
        return self.stack.enter_context(self.node.expose(port))

    def pod(self, store: str, put: Callable[[int], None], **values: str) -> None:
        put(0)
        pod_annotations = annotations(
            inject="true", path=PATH, watch_seconds="300", native_sidecar="true", **values
        )
        self.ws.core.create_namespaced_pod(self.ws.namespace, {
            "metadata": {"name": store, "annotations": pod_annotations},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "app", "image": self.image, "imagePullPolicy": "Never",
                    "command": ["python3", "/app/watcher.py", PATH],
                    "volumeMounts": [{"name": "app", "mountPath": "/app", "readOnly": True}],
                }],
                "volumes": [{"name": "app", "configMap": {"name": "latency-app"}}],
            },
        })  # fmt: skip
        self.timed[store] = Timed(store, put)


@pytest.fixture(scope="module")
def latency_pods(
    workspace: Workspace,
    kube_node: KubeNode,
    node_image: ProjectImage,
    consul_server: Any,
    etcd_server: Any,
    redis_server: Any,
    nats_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Workspace, dict[str, Timed]]]:
    ws = workspace
    with contextlib.ExitStack() as stack:
        ws.config_map("latency-app", {"watcher.py": WATCHER})
        pods = Pods(ws, kube_node, node_image("agent").name, stack)
        key = f"e2e-{pods.label}/latency.json"

        pods.pod("consul", lambda g: consul_server.client.kv.put(key, document(g)),
                 source="consul", endpoint=f"http://{pods.reach(consul_server.port)}",
                 key=key)  # fmt: skip
        pods.pod("etcd", lambda g: etcd_server.client.put(key, document(g)),
                 source="etcd", endpoint=f"http://{pods.reach(etcd_server.port)}",
                 key=key)  # fmt: skip
        pods.pod("redis", lambda g: redis_server.client.set(key, document(g)),
                 source="redis", endpoint=f"redis://{pods.reach(redis_server.port)}/0",
                 key=key)  # fmt: skip
        nats_put = _nats_writer(nats_server, f"lat{pods.label}", stack)
        nats_port = urlsplit(nats_server.url).port
        assert nats_port
        pods.pod("nats", nats_put, source="nats", endpoint=f"nats://{pods.reach(nats_port)}",
                 key=f"lat{pods.label}/latency.json")  # fmt: skip
        _config_server(pods, tmp_path_factory.mktemp("latency-config-server"))

        began = time.monotonic()
        for name in pods.timed:
            _wait_seen(ws, name, 0, timeout=180)
        print(f"\ne2e latency: {len(pods.timed)} pods rendering {time.monotonic() - began:.1f} s")
        yield ws, pods.timed


def _nats_writer(server: Any, bucket: str, stack: contextlib.ExitStack) -> Callable[[int], None]:
    """One connection for all rounds, on a loop of its own (a new connection per put would
    add a connect to every round)."""
    loop = asyncio.new_event_loop()
    stack.callback(loop.close)

    async def open_kv() -> tuple[Any, Any]:
        from nats.js.api import KeyValueConfig

        nc = await server.connect()
        kv = await nc.jetstream().create_key_value(KeyValueConfig(bucket=bucket))
        return nc, kv

    nc, kv = loop.run_until_complete(open_kv())
    stack.callback(lambda: loop.run_until_complete(nc.close()))

    def put(gen: int) -> None:
        loop.run_until_complete(kv.put("latency.json", document(gen).encode()))

    return put


def _config_server(pods: Pods, tmp: Path) -> None:
    """Our config server in this process, a static-token client; changes pushed over SSE."""
    from dynconf_store_configserver.server.settings import parse_settings

    token = uuid.uuid4().hex * 2
    section = tmp / "latency.toml"

    def put(gen: int) -> None:
        staged = tmp / "latency.toml.new"
        staged.write_text(f"[latency]\nround = {gen}\n")
        staged.replace(section)

    put(0)
    settings = parse_settings({"server": {
        "bind": "127.0.0.1:0", "file_poll_seconds": 0.05,
        "sections": [{"application": "latency", "profile": "e2e", "files": ["latency.toml"]}],
        "clients": [{"name": "latency", "token": token, "applications": ["latency"]}],
    }}, base=tmp)  # fmt: skip
    server = _configserver_support.Running(settings, _configserver_support.free_port())
    server.start()
    pods.stack.callback(server.stop)
    pods.ws.secret("latency-token", {"token": token})
    pods.pod("config-server", put, source="config-server",
             endpoint=f"http://{pods.reach(server.port)}", key="latency/e2e", auth="token",
             token_secret="latency-token/token")  # fmt: skip


def _wait_seen(ws: Workspace, pod: str, gen: int, timeout: float) -> float:
    """The container's timestamp for the first line showing ``gen`` (from the log stream)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pod_status = ws.core.read_namespaced_pod(pod, ws.namespace).status
            running = any(
                s.name == "app" and s.state.running for s in pod_status.container_statuses or []
            )
        except client.ApiException:
            running = False
        if running:
            break
        assert time.monotonic() < deadline, f"{pod}: app not running after {timeout} s"
        time.sleep(0.2)
    response = ws.core.read_namespaced_pod_log(
        pod, ws.namespace, container="app", follow=True, _preload_content=False,
        _request_timeout=max(1.0, deadline - time.monotonic()),
    )  # fmt: skip
    try:
        buffer = b""
        for chunk in response.stream(1024):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                word, _, rest = line.decode().partition(" ")
                at, _, seen = rest.partition(" ")
                if word == "seen" and seen == str(gen):
                    return float(at)
    finally:
        response.release_conn()
    raise AssertionError(f"{pod}: round {gen} never seen")


def _rounds(ws: Workspace, entry: Timed, errors: list[str]) -> None:
    """One store's rounds; each put waits out the watch's request floor (a change arriving
    sooner after the last is held by it, by design: at most two requests a second)."""
    try:
        for gen in range(1, ROUNDS + 1):
            time.sleep(GAP)
            put_at = time.time()
            entry.put(gen)
            entry.took.append(_wait_seen(ws, entry.store, gen, timeout=30) - put_at)
    except Exception as err:  # reported by the test, in the main thread
        errors.append(f"{entry.store}: {err!r}")


def test_push_stores_deliver_a_put_into_the_container(
    latency_pods: tuple[Workspace, dict[str, Timed]],
) -> None:
    ws, timed = latency_pods
    errors: list[str] = []
    threads = [threading.Thread(target=_rounds, args=(ws, e, errors)) for e in timed.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    lines = []
    for store, entry in timed.items():
        ordered = sorted(entry.took)
        p50 = statistics.median(ordered)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]
        lines.append(f"  {store:<14} p50 {p50 * 1000:6.0f} ms  p95 {p95 * 1000:6.0f} ms  "
                     f"max {ordered[-1] * 1000:6.0f} ms")  # fmt: skip
    print(f"\ne2e latency: put → seen in the app container, {ROUNDS} rounds, watch-seconds 300")
    p95s = {s: sorted(t.took)[round(0.95 * ROUNDS) - 1] for s, t in timed.items()}
    met = all(p95 <= TARGET for p95 in p95s.values())
    print("\n".join(lines) + f"\n  target p95 <= {TARGET:g} s: {'met' if met else 'NOT met'}")
    assert all(p95 <= SEED_CEILING for p95 in p95s.values()), p95s
