"""The soak: about fifty consumers on the kubelet node, changes at 1/s, rotations and outages.

Opt-in and not part of CI: skipped unless ``DYNCONF_SOAK_MINUTES`` is set (``5`` validates the
leg, ``60`` is the real run); it needs ``DYNCONF_E2E=1`` and the node like every e2e leg.

One release of its own (``dynconf-soak``: two webhook replicas with ``selfRotate`` and
``failurePolicy: Fail``, selecting only pods labelled for the soak; the operator; the node
agent), one namespace, and three kinds of consumer, each pod's ``app`` a busybox reader
(``faults_support.reader``) of ``/config/doc.json``:

- **agent**: sidecar-injected (``mode: both``, ``watch-seconds`` 5), two pods for each of the
  eleven shapes of leg 2 (``test_stores``: consul, vault with kubernetes auth, etcd with a
  password and with a client certificate, redis, nats with a token, s3, git over https and
  over ssh, firestore, the config server with kubernetes auth) — all nine stores;
- **csi**: inline volumes of the node agent, two pods per store for consul, redis, etcd
  (password), nats (token), vault (token), firestore (emulator), the config server (token) and
  git; the credentials come from ``nodePublishSecretRef``. Not s3: a volume has no way to hand
  the client an AWS key (its Secret keys are token, password, endpoint);
- **operator**: one Render per pod into a ConfigMap the pod mounts, two per store for consul,
  redis, etcd, nats (token), git and the config server (token); vault into a Secret the pod
  mounts (a vault document in a ConfigMap is refused by design). Not s3 nor firestore: a class
  carries a source, an endpoint and a token, and neither client can be pointed at the test
  server (an S3 endpoint URL, the emulator) with those alone.

Volumes and Renders read git from the git daemon (``git://``): neither can name a CA for https
or carry an ssh key, and the store refuses anonymous plain ``http://`` off loopback.

Each (kind, shape) is one document, holding ``{"gen": N, ...}``; a writer moves the documents
round robin, ``RATE`` changes a second in all. Every store server is reached through a relay of
its own (``tests/fixtures/relay.py``) exposed to the pods, so an outage is a cut of every relay
of one store while its server stays up and is still written. The schedule scales with the run
(``Schedule``): a forced rotation every 10 minutes of a 60-minute run (at least ``ROTATION_FLOOR``
apart, so each reaches every replica before the next, see ``test_rotation``), an outage every
15 minutes lasting a minute (a third of the period in runs under 12 minutes), the warm-up sample
at a tenth of the run. An annotated pod is
dry-run created every ``PROBE_EVERY`` seconds so admissions cross every rotation.

At the end the writer stops, the relays are restored and every document is written once more;
``faults_support.FileInvariants`` holds each consumer to it (ends on the newest generation
within its kind's bound; never missing, torn or back a generation, over the whole run). RSS,
open descriptors and threads of the webhooks, the operator, the node agent and one agent per
shape (and the CPU each used between the two samples, reported, not judged) are read from
``/proc`` (the node shares the machine's PID namespace, and the
containers' init processes are the Python programs themselves), their pids from containerd.
The table is printed and written to ``$DYNCONF_SOAK_REPORT`` (default
``<run dir>/soak-report.txt``) before anything is asserted.

Other sessions: ``install_chart`` holds the node's session lock, so no other session's release
comes and goes during the soak; the legs that apply the chart's components without it
(``test_operator``, ``test_node_agent``) share the cluster-wide CRDs and CSI driver name, so do
not run them beside it. Start the store servers first (``scripts/testenv start``): a server the
soak finds running was started by someone else, and a pytest session that started one stops it
when it ends, under the soak.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import pytest
from kubernetes import client  # type: ignore[import-untyped]
from prometheus_client.parser import text_string_to_metric_families

import tests.e2e.stores_support as stores_support
from dynconf_k8s.node.service import DRIVER_NAME
from dynconf_k8s.operator.types import CLASS_KIND, RENDER_KIND
from tests.e2e.conftest import PROBE, InstallChart, Release
from tests.e2e.faults_support import FileInvariants, reader
from tests.e2e.stores_support import (
    Workspace,
    bind_auth_delegator,
    load_conftest,
    unbind_auth_delegator,
)
from tests.e2e.support import AGENT, describe, statuses, wait_ready
from tests.e2e.test_rotation import NOT_AFTER, _ca_bundle
from tests.e2e.test_stores import (
    Stores,
    consul,
    document,
    etcd_password,
    etcd_tls,
    firestore,
    git_http,
    git_ssh,
    nats,
    redis,
    s3,
    ssh_server,
    vault,
)
from tests.fixtures.kube import _run_dir
from tests.fixtures.node import KubeNode
from tests.fixtures.relay import Relay
from tests.testenv.test_node import BUSYBOX

MINUTES: Final = os.environ.get("DYNCONF_SOAK_MINUTES", "")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not MINUTES, reason="the soak is opt-in: set DYNCONF_SOAK_MINUTES"),
]

__all__ = ["ssh_server"]  # a fixture, used by name

_configserver_support = load_conftest(
    "packages/dynconf-store-configserver/tests/conftest.py", "dynconf_e2e_configserver"
)
_operator_support = load_conftest(
    "packages/dynconf-k8s/tests/operator/conftest.py", "dynconf_e2e_operator_support"
)
# mypy takes stores_support.annotations for the ``__future__`` feature the name shadows
pod_annotations: Callable[..., dict[str, str]]
pod_annotations = stores_support.annotations  # type: ignore[assignment,attr-defined]

RELEASE: Final = "dynconf-soak"
LABEL: Final = {"dynconf-e2e/release": "soak"}
VALUES: Final[dict[str, Any]] = {
    "webhook": {
        "replicas": 2,
        "failurePolicy": "Fail",
        "selfRotate": {"enabled": True},
        "objectSelector": {"matchLabels": LABEL},
        # test_scale's reason: at the contract's 10m, beside fifty pods starting, an admission
        # outlasts timeoutSeconds; the memory is what the chart gives selfRotate by default
        "resources": {"requests": {"cpu": "200m", "memory": "64Mi"},
                      "limits": {"memory": "192Mi"}},
    },
    "operator": {"enabled": True},
    "nodeAgent": {"enabled": True},
}  # fmt: skip
PATH: Final = "/config/doc.json"
FILE: Final = "doc.json"
WATCH: Final = 5
"""``watch-seconds`` of agents and volumes, and the Renders' ``intervalSeconds``."""
PER_SHAPE: Final = 2
"""Consumer pods per (kind, shape)."""
RATE: Final = 1.0
"""Changes a second, over every document."""
BOUNDS: Final = {"agent": 60.0, "csi": 60.0, "operator": 150.0}
"""Seconds a consumer has to show the final write; a mounted ConfigMap or Secret follows the
kubelet's sync (``syncFrequency`` 10 s on this node, its cache TTL on top)."""
KINDS: Final = tuple(BOUNDS)
READY_TIMEOUT: Final = 600.0
PROBE_EVERY: Final = 5.0
ROTATION_FLOOR: Final = 150.0
"""Seconds between two forced rotations at least: the caBundle, the kubelet's Secret sync and
each replica's 60 s reload must all pass first (test_rotation measured 52-60 s)."""
OUTAGE_ORDER: Final = ("consul", "firestore", "vault", "etcd", "git", "redis", "nats", "s3",
                       "config-server")  # fmt: skip
"""Which store each outage cuts, in turn: a push store over HTTP, one over gRPC, a polled one,
…; a 60-minute run has four."""
RSS_GROWTH: Final = 5.0
"""Per cent of RSS growth allowed from the warm-up sample to the end."""
FLAT_FDS: Final = 4
FLAT_THREADS: Final = 2
"""Open descriptors and threads may end this many above warm-up (a connection being made, a
worker thread not yet idled out); more is growth."""
STORE_OF: Final = {"etcd-password": "etcd", "etcd-tls": "etcd", "git-http": "git",
                   "git-ssh": "git"}  # fmt: skip


@dataclass(frozen=True)
class Schedule:
    """When things happen, in seconds from the soak's start, for a run of ``seconds``."""

    seconds: float

    @property
    def warmup(self) -> float:
        return self.seconds / 10

    @property
    def rotation_every(self) -> float:
        return max(600 * self.seconds / 3600, ROTATION_FLOOR)

    @property
    def outage_every(self) -> float:
        return 900 * self.seconds / 3600

    @property
    def outage_length(self) -> float:
        return min(60.0, self.outage_every / 3)

    def rotations(self) -> list[float]:
        return _midpoints(self.rotation_every, self.seconds)

    def outages(self) -> list[float]:
        return _midpoints(self.outage_every, self.seconds - self.outage_length)


def _midpoints(every: float, until: float) -> list[float]:
    """``every/2``, ``every/2 + every``, … up to ``until``."""
    out, at = [], every / 2
    while at < until:
        out.append(at)
        at += every
    return out


# ---------------------------------------------------------------------------- relays
class SoakRelay(Relay):
    """A :class:`Relay` that closes and forgets a connection once both its pipes have ended.

    The fixture's relay keeps every relayed socket open until a cut; a soak opens tens of
    thousands (each Render read and each git fetch is a new connection), more descriptors than
    the process may hold in an hour.
    """

    relayed = 0
    """Connections relayed and ended."""

    def _pipe(self, link: Any, source: socket.socket, sink: socket.socket) -> None:
        super()._pipe(link, source, sink)
        with self._lock:
            ended = link.pipes == 0
            if ended:
                self.relayed += 1
                self._conns = [c for c in self._conns if c not in (link.client, link.upstream)]
        if ended:
            link.client.close()
            link.upstream.close()


# ---------------------------------------------------------------------------- documents
@dataclass
class Doc:
    """One document, the store it lives in, and the pods of one kind that consume it."""

    kind: str
    shape: str
    put: Callable[[int], None]
    pods: list[str]
    checker: FileInvariants | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def store(self) -> str:
        return STORE_OF.get(self.shape, self.shape)

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.shape}"


def reader_pod(
    name: str, *, labels: dict[str, str] | None = None, annotated: dict[str, str] | None = None,
    volume: dict[str, Any] | None = None, service_account: str | None = None,
    security: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A pod whose busybox ``app`` prints ``PATH`` every 200 ms (``faults_support.reader``).

    No readiness probe: fifty exec probes a second would be the node's whole CPU; the agents
    carry their own ``/readyz``, and a volume is there before the app starts.
    """
    container: dict[str, Any] = {"name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                                 "command": ["sh", "-c", reader(PATH)]}  # fmt: skip
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 1, "containers": [container]}
    if volume is not None:
        container["volumeMounts"] = [{"name": "config", "mountPath": "/config", "readOnly": True}]
        spec["volumes"] = [{"name": "config", **volume}]
    if service_account:
        spec["serviceAccountName"] = service_account
    if security:
        spec["securityContext"] = security
    metadata = {"name": name, "labels": labels or {}, "annotations": annotated or {}}
    return {"metadata": metadata, "spec": spec}


class SoakStores(Stores):
    """Leg 2's per-store builders, with every server behind a relay grouped by store, and
    each shape's pods as soak readers (``PER_SHAPE`` of them, kind ``agent``)."""

    def __init__(self, ws: Workspace, node: KubeNode, stack: contextlib.ExitStack) -> None:
        super().__init__(ws, node, stack)
        self.group = ""
        self.relays: dict[str, list[SoakRelay]] = {}
        self.exposed: dict[int, str] = {}
        self.docs: list[Doc] = []
        self.bodies: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def store(self, name: str) -> Iterator[None]:
        """Relays made in the block belong to store ``name`` (its outage cuts them all)."""
        self.group = name
        try:
            yield
        finally:
            self.group = ""

    def reach(self, port: int) -> str:
        if port not in self.exposed:
            assert self.group, "a server reached outside SoakStores.store()"
            relay = SoakRelay(port)
            self.stack.callback(relay.close)
            self.exposed[port] = self.stack.enter_context(self.node.expose(relay.port))
            self.relays.setdefault(self.group, []).append(relay)
        return self.exposed[port]

    def pod(self, store: str, put: Callable[[int], None], security: Any = None,
            service_account: str | None = None, **values: str) -> None:  # fmt: skip
        put(1)
        base = {"inject": "true", "mode": "both", "path": PATH, "watch_seconds": str(WATCH)}
        names = [f"agent-{store}-{i}" for i in range(PER_SHAPE)]
        for name in names:
            self.bodies.append(reader_pod(
                name, labels=dict(LABEL), annotated=pod_annotations(**base, **values),
                service_account=service_account, security=security,
            ))  # fmt: skip
        self.docs.append(Doc("agent", store, put, names))

    def volume_pods(
        self, shape: str, put: Callable[[int], None], attributes: dict[str, str],
        secret: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        """``PER_SHAPE`` pods mounting one document as a node-agent volume."""
        put(1)
        csi: dict[str, Any] = {
            "driver": DRIVER_NAME, "readOnly": True,
            "volumeAttributes": {**attributes, "path": FILE, "watch-seconds": str(WATCH)},
        }  # fmt: skip
        if secret:
            self.ws.secret(f"csi-{shape}", secret)
            csi["nodePublishSecretRef"] = {"name": f"csi-{shape}"}
        names = [f"csi-{shape}-{i}" for i in range(PER_SHAPE)]
        self.bodies += [reader_pod(name, volume={"csi": csi}) for name in names]
        self.docs.append(Doc("csi", shape, put, names))

    def render_pods(
        self, kube: Any, shape: str, put: Callable[[int], None], source: str, endpoint: str,
        key: str, token: str | None = None,
    ) -> None:  # fmt: skip
        """A class, and ``PER_SHAPE`` Renders each into a ConfigMap (vault: a Secret) that one
        pod mounts."""
        put(1)
        spec = {"source": source, "endpoint": endpoint}
        if token:
            self.ws.secret(f"op-{shape}", {"token": token})
            spec["tokenSecret"] = f"op-{shape}"
        kube.create(CLASS_KIND, self.ws.namespace, f"op-{shape}", spec)
        names = [f"op-{shape}-{i}" for i in range(PER_SHAPE)]
        for name in names:
            secret = source == "vault"
            target = {"secret" if secret else "configMap": name, "file": FILE}
            kube.create(RENDER_KIND, self.ws.namespace, name, {
                "class": f"op-{shape}", "key": key, "intervalSeconds": WATCH, "target": target,
            })  # fmt: skip
            volume = {"secret": {"secretName": name}} if secret else {"configMap": {"name": name}}
            self.bodies.append(reader_pod(name, volume=volume))
        self.docs.append(Doc("operator", shape, put, names))


@dataclass(frozen=True)
class Servers:
    consul: Any
    vault: Any
    etcd: Any
    etcd_auth: Any
    etcd_tls: Any
    redis: Any
    nats: Any
    s3: Any
    git: Any
    ssh: Any
    firestore: Any


def _json(store: str, gen: int) -> str:
    return json.dumps(document(store, gen))


def _consul_put(server: Any, key: str, store: str) -> Callable[[int], None]:
    return lambda gen: server.client.kv.put(key, _json(store, gen))


def _redis_put(server: Any, key: str, store: str) -> Callable[[int], None]:
    return lambda gen: server.client.set(key, _json(store, gen))


def _etcd_put(server: Any, key: str, store: str) -> Callable[[int], None]:
    return lambda gen: server.client.put(key, _json(store, gen))


def _vault_put(server: Any, path: str, store: str) -> Callable[[int], None]:
    kv = server.client.secrets.kv.v2
    return lambda gen: kv.create_or_update_secret(path, secret=document(store, gen))


def _firestore_put(server: Any, key: str, store: str) -> Callable[[int], None]:
    return lambda gen: server.client.document(key).set(document(store, gen))


def _nats_put(server: Any, bucket: str, key: str, store: str) -> Callable[[int], None]:
    async def put(gen: int) -> None:
        from nats.js.api import KeyValueConfig

        nc = await server.connect(with_token=True)
        try:
            kv = await nc.jetstream().create_key_value(KeyValueConfig(bucket=bucket))
            await kv.put(key, _json(store, gen).encode())
        finally:
            await nc.close()

    return lambda gen: asyncio.run(put(gen))


def _git_put(server: Any, path: str, store: str) -> Callable[[int], None]:
    """A commit of ``path``; retried once when another writer moved ``main`` under it."""

    def put(gen: int) -> None:
        try:
            server.commit_file(path, _json(store, gen))
        except Exception:
            server.commit_file(path, _json(store, gen))

    return put


def config_server(
    s: SoakStores, node: KubeNode, kube_client: object, tmp: Path
) -> tuple[str, str, dict[str, Callable[[int], None]]]:
    """This repository's config server, one application per kind (agents with kubernetes auth
    as ``billing``, volumes and Renders with a client token); ``(endpoint, token, put by
    kind)``. Each section file is the whole document (``whole_document``), ``gen`` at its top."""
    tmp.mkdir(parents=True, exist_ok=True)
    reviewer = bind_auth_delegator(kube_client, s.ws.namespace, "config-server")
    s.stack.callback(unbind_auth_delegator, kube_client, s.ws.namespace, "config-server")
    (tmp / "reviewer-token").write_text(reviewer)
    token = uuid.uuid4().hex * 2

    def writer(kind: str) -> Callable[[int], None]:
        def put(gen: int) -> None:
            staged = tmp / f"{kind}.toml.new"
            staged.write_text(f'gen = {gen}\nstore = "config-server"\n')
            staged.replace(tmp / f"{kind}.toml")

        return put

    puts = {kind: writer(kind) for kind in KINDS}
    for put in puts.values():
        put(1)
    from dynconf_store_configserver.server.settings import parse_settings

    settings = parse_settings({"server": {
        "bind": "127.0.0.1:0",
        "file_poll_seconds": 0.1,
        "sections": [{"application": f"soak-{kind}", "profile": "prod", "files": [f"{kind}.toml"],
                      "whole_document": True} for kind in KINDS],
        "clients": [{"name": "soak", "token": token,
                     "applications": ["soak-csi", "soak-operator"]}],
        "kubernetes": {
            "api_server": node.plane.server, "ca": str(node.plane.ca),
            "token_path": str(tmp / "reviewer-token"),
            "grants": [{"service_account": f"{s.ws.namespace}:billing",
                        "applications": ["soak-agent"]}],
        },
    }}, base=tmp)  # fmt: skip
    server = _configserver_support.Running(settings, _configserver_support.free_port())
    server.start()
    s.stack.callback(server.stop)
    with s.store("config-server"):
        endpoint = f"http://{s.reach(server.port)}"
    return endpoint, token, puts


def build(s: SoakStores, servers: Servers, node: KubeNode, kube_client: object, tmp: Path) -> None:
    """Every document and the bodies of its pods (nothing is created in the cluster but the
    objects the pods name: Secrets, ConfigMaps, ServiceAccounts, classes and Renders)."""
    kube = _operator_support.Kube(kube_client)
    label = s.label
    # -- agents: leg 2's shapes
    with s.store("consul"):
        consul(s, servers.consul)
    with s.store("vault"):
        vault(s, servers.vault, node, kube_client)
    with s.store("etcd"):
        etcd_password(s, servers.etcd_auth)
        etcd_tls(s, servers.etcd_tls)
    with s.store("redis"):
        redis(s, servers.redis)
    with s.store("nats"):
        nats(s, servers.nats)
    with s.store("s3"):
        s3(s, servers.s3)
    with s.store("git"):
        git_http(s, servers.git, tmp / "git-tls")
        git_ssh(s, servers.git, servers.ssh)
    with s.store("firestore"):
        firestore(s, servers.firestore)
    cs_endpoint, cs_token, cs_put = config_server(s, node, kube_client, tmp / "config-server")
    s.pod("config-server", cs_put["agent"], service_account="billing", source="config-server",
          endpoint=cs_endpoint, key="soak-agent/prod", auth="kubernetes")  # fmt: skip

    # -- where volumes and Renders reach each server
    with s.store("consul"):
        consul_at = f"http://{s.reach(servers.consul.port)}"
    with s.store("redis"):
        redis_at = f"redis://{s.reach(servers.redis.port)}/0"
    with s.store("etcd"):
        etcd_auth_at = f"http://{s.reach(servers.etcd_auth.port)}"
        etcd_at = f"http://{s.reach(servers.etcd.port)}"
    with s.store("nats"):
        nats_port = urlsplit(servers.nats.token_url).port
        assert nats_port
        nats_at = f"nats://{s.reach(nats_port)}"
    with s.store("vault"):
        vault_port = urlsplit(servers.vault.addr).port
        assert vault_port
        vault_at = f"http://{s.reach(vault_port)}"
    with s.store("firestore"):
        firestore_at = f"http://{s.reach(int(servers.firestore.emulator_host.rpartition(':')[2]))}"
    with s.store("git"):
        # the git daemon: a volume cannot name a CA for https, a class neither, and the store
        # refuses anonymous plain http to a host off loopback (but not git://)
        git_url = urlsplit(servers.git.daemon_url)
        assert git_url.port
        git_at = f"git://{s.reach(git_url.port)}{git_url.path}"
    bucket = f"soak{label}"
    etcd_auth, git = servers.etcd_auth, servers.git

    csi, op = f"soak-{label}/csi", f"soak-{label}/operator"
    volumes: list[tuple[str, Callable[[int], None], dict[str, str], dict[str, str] | None]] = [
        ("consul", _consul_put(servers.consul, f"{csi}-consul.json", "csi-consul"),
         {"source": "consul", "endpoint": consul_at, "key": f"{csi}-consul.json"}, None),
        ("redis", _redis_put(servers.redis, f"{csi}-redis.json", "csi-redis"),
         {"source": "redis", "endpoint": redis_at, "key": f"{csi}-redis.json"}, None),
        ("etcd", _etcd_put(etcd_auth, f"{csi}-etcd.json", "csi-etcd"),
         {"source": "etcd", "endpoint": etcd_auth_at, "key": f"{csi}-etcd.json",
          "auth-username": etcd_auth.user}, {"password": etcd_auth.password}),
        ("nats", _nats_put(servers.nats, bucket, "csi.json", "csi-nats"),
         {"source": "nats", "endpoint": nats_at, "key": f"{bucket}/csi.json"},
         {"token": servers.nats.token}),
        ("vault", _vault_put(servers.vault, f"{csi}-vault", "csi-vault"),
         {"source": "vault", "endpoint": vault_at, "key": f"secret/{csi}-vault"},
         {"token": servers.vault.token}),
        ("firestore", _firestore_put(servers.firestore, f"{csi}-firestore", "csi-firestore"),
         {"source": "firestore", "endpoint": servers.firestore.project, "key": f"{csi}-firestore",
          "auth": "emulator", "api-url": firestore_at}, None),
        ("config-server", cs_put["csi"],
         {"source": "config-server", "endpoint": cs_endpoint, "key": "soak-csi/prod",
          "auth": "token"}, {"token": cs_token}),
        ("git", _git_put(git, f"{csi}-git.json", "csi-git"),
         {"source": "git", "endpoint": git_at, "key": f"{csi}-git.json", "ref": "main"}, None),
    ]  # fmt: skip
    for shape, put, attributes, secret in volumes:
        s.volume_pods(shape, put, attributes, secret)
    renders: list[tuple[str, Callable[[int], None], str, str, str | None]] = [
        ("consul", _consul_put(servers.consul, f"{op}-consul.json", "op-consul"), consul_at,
         f"{op}-consul.json", None),
        ("redis", _redis_put(servers.redis, f"{op}-redis.json", "op-redis"), redis_at,
         f"{op}-redis.json", None),
        ("etcd", _etcd_put(servers.etcd, f"{op}-etcd.json", "op-etcd"), etcd_at,
         f"{op}-etcd.json", None),
        ("nats", _nats_put(servers.nats, bucket, "operator.json", "op-nats"), nats_at,
         f"{bucket}/operator.json", servers.nats.token),
        ("vault", _vault_put(servers.vault, f"{op}-vault", "op-vault"), vault_at,
         f"secret/{op}-vault", servers.vault.token),
        ("git", _git_put(git, f"{op}-git.json", "op-git"), git_at, f"{op}-git.json", None),
        ("config-server", cs_put["operator"], cs_endpoint, "soak-operator/prod", cs_token),
    ]  # fmt: skip
    for shape, put, endpoint, key, token in renders:
        s.render_pods(kube, shape, put, shape, endpoint, key, token)


# ---------------------------------------------------------------------------- processes
@dataclass(frozen=True)
class Usage:
    """One process as ``/proc`` shows it."""

    pid: int
    rss: int
    """Bytes (``VmRSS``)."""
    fds: int
    threads: int
    restarts: int
    cpu: float
    """Seconds of CPU (user + system) the process has used."""


def container_pids(node: KubeNode) -> dict[str, int]:
    """Each running container's init pid by container id (``ctr tasks ls``)."""
    out = {}
    for line in node.ctr("tasks", "ls").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            out[fields[0]] = int(fields[1])
    return out


def usage(pid: int, restarts: int) -> Usage:
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return Usage(
        pid=pid,
        rss=int(status["VmRSS"].split()[0]) * 1024,
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        threads=int(status["Threads"]),
        restarts=restarts,
        cpu=(int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"),  # utime, stime
    )


# ---------------------------------------------------------------------------- the soak
class Ticker(threading.Thread):
    """Calls ``step`` every ``every`` seconds until stopped (a step that raises is counted)."""

    def __init__(self, name: str, every: float, step: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.every, self.step = every, step
        self.stopping = threading.Event()
        self.failures: list[str] = []

    def run(self) -> None:
        due = time.monotonic()
        while not self.stopping.wait(max(0.0, due - time.monotonic())):
            try:
                self.step()
            except Exception as error:  # kept for the table; the soak goes on
                self.failures.append(f"{type(error).__name__}: {str(error)[:200]}")
            due += self.every

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


@dataclass
class Rotation:
    at: float
    bundled: float | None = None
    served: float | None = None
    error: str = ""


@dataclass
class Outage:
    store: str
    began: float
    ended: float = 0.0


@dataclass
class Soak:
    """Everything the run needs and everything it measured."""

    release: Release
    node: KubeNode
    ws: Workspace
    docs: list[Doc]
    relays: dict[str, list[SoakRelay]]
    components: dict[str, tuple[str, str, str]]
    """Name → (namespace, pod, container) of each process sampled."""
    schedule: Schedule
    began: float = 0.0
    samples: dict[str, dict[str, Usage | None]] = field(default_factory=dict)
    sampled_at: dict[str, float] = field(default_factory=dict)
    rotations: list[Rotation] = field(default_factory=list)
    outages: list[Outage] = field(default_factory=list)
    probes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("admitted", "uninjected", "refused"), 0))  # fmt: skip
    probe_refusals: list[str] = field(default_factory=list)
    check_failures: list[str] = field(default_factory=list)
    final: dict[str, float | None] = field(default_factory=dict)
    """Seconds from the final write to each consumer showing it."""
    webhook_counts: dict[str, float] = field(default_factory=dict)

    @property
    def now(self) -> float:
        return time.monotonic() - self.began

    # -- the steps ------------------------------------------------------------------------
    def write_next(self, order: Iterator[Doc]) -> None:
        self.write(next(order))

    def write(self, doc: Doc) -> None:
        """The document's next generation; a failed put is counted, and the soak goes on."""
        assert doc.checker is not None
        try:
            doc.checker.write()
        except Exception as error:
            doc.errors.append(f"{type(error).__name__}: {str(error)[:160]}")

    def probe(self) -> None:
        """A dry-run create of an annotated pod: admitted with the agent, or not."""
        body = {
            "metadata": {"generateName": "probe-", "labels": dict(LABEL),
                         "annotations": {f"dynamic-config.rs/{k}": v for k, v in PROBE.items()}},
            "spec": {"containers": [{"name": "app", "image": BUSYBOX,
                                     "imagePullPolicy": "Never"}]},
        }  # fmt: skip
        try:
            made = self.ws.core.create_namespaced_pod(self.ws.namespace, body, dry_run="All")
        except client.ApiException as error:
            self.probes["refused"] += 1
            self.probe_refusals.append(f"{self.now:.0f} s: {str(error.body)[:300]}")
            return
        every = [*(made.spec.init_containers or []), *made.spec.containers]
        injected = any(c.name.startswith(AGENT) for c in every)
        self.probes["admitted" if injected else "uninjected"] += 1

    def rotate(self) -> None:
        """Force one rotation (the contract's trigger) and follow it to every replica (also
        past the run's end: a rotation forced late is followed while the final checks run)."""
        release, core = self.release, self.release.core
        record = Rotation(self.now)
        self.rotations.append(record)
        bundle, served = _ca_bundle(release), release.serving_expiries()
        core.patch_namespaced_secret(f"{release.fullname}-webhook-tls", release.namespace,
                                     {"metadata": {"annotations": {NOT_AFTER: None}}})  # fmt: skip
        forced = time.monotonic()
        while _ca_bundle(release) == bundle:
            if time.monotonic() - forced > 90:
                record.error = "no rotation reached the caBundle in 90 s"
                return
            time.sleep(1)
        record.bundled = time.monotonic() - forced
        while True:
            now = release.serving_expiries()
            if len(now) == len(served) and all(now[p] != served.get(p) for p in now):
                break
            if time.monotonic() - forced > 240:
                record.error = f"replicas still served the old pair 240 s after the force: {now}"
                return
            time.sleep(2)
        record.served = time.monotonic() - forced

    def sample(self, name: str) -> None:
        pids = container_pids(self.node)
        taken: dict[str, Usage | None] = {}
        for component, (namespace, pod, container) in self.components.items():
            try:
                status = statuses(self.ws.core.read_namespaced_pod(pod, namespace))[container]
                pid = pids[str(status.container_id).rpartition("/")[2]]
                taken[component] = usage(pid, status.restart_count)
            except (client.ApiException, KeyError, OSError):
                taken[component] = None
        self.samples[name] = taken
        self.sampled_at[name] = self.now

    def cut(self, store: str) -> None:
        self.outages.append(Outage(store, self.now))
        for relay in self.relays[store]:
            relay.cut()

    def restore(self, store: str) -> None:
        for relay in self.relays[store]:
            relay.restore()
        self.outages[-1].ended = self.now

    # -- the run --------------------------------------------------------------------------
    def run(self) -> None:
        """The schedule, then the final write of every document and the checks."""
        sched = self.schedule
        order = _round_robin(self.docs)
        writer = Ticker("soak-writer", 1 / RATE, lambda: self.write_next(order))
        prober = Ticker("soak-prober", PROBE_EVERY, self.probe)
        rotator_stop = threading.Event()

        def rotations() -> None:
            for at in sched.rotations():
                if rotator_stop.wait(max(0.0, at - self.now)):
                    return
                try:
                    self.rotate()
                except Exception as error:
                    self.rotations[-1].error = f"{type(error).__name__}: {str(error)[:200]}"

        rotator = threading.Thread(target=rotations, name="soak-rotator", daemon=True)
        events: list[tuple[float, Callable[[], None]]] = [
            (sched.warmup, lambda: self.sample("warm-up"))
        ]
        for index, at in enumerate(sched.outages()):
            store = OUTAGE_ORDER[index % len(OUTAGE_ORDER)]
            events.append((at, functools.partial(self.cut, store)))
            events.append((at + sched.outage_length, functools.partial(self.restore, store)))
        events.sort(key=lambda event: event[0])
        self.began = time.monotonic()
        for thread in (writer, prober, rotator):
            thread.start()
        try:
            for at, action in events:
                time.sleep(max(0.0, at - self.now))
                action()
            time.sleep(max(0.0, sched.seconds - self.now))
            self.sample("end")
        except BaseException:
            rotator_stop.set()
            rotator.join(300)
            raise
        finally:
            writer.stop()
            prober.stop()
            rotator_stop.set()  # no new rotation; one under way is followed to its end
            for relays in self.relays.values():
                for relay in relays:
                    relay.restore()
        for doc in self.docs:
            self.write(doc)
        for doc in self.docs:
            assert doc.checker is not None
            try:
                for pod, verdict in doc.checker.check().items():
                    self.final[pod] = verdict.took
            except AssertionError as error:
                self.check_failures.append(str(error)[:2000])
        rotator.join(300)
        self.webhook_counts = webhook_counts(self.release)

    # -- the verdicts ---------------------------------------------------------------------
    def restarts(self, pods: list[str]) -> int:
        total = 0
        for pod in pods:
            found = statuses(self.ws.core.read_namespaced_pod(pod, self.ws.namespace))
            total += sum(status.restart_count for status in found.values())
        return total

    def report(self) -> tuple[str, list[str]]:
        """The table, and every target missed (empty: the soak passed)."""
        missed: list[str] = []
        lines = [
            f"dynconf soak: {self.schedule.seconds / 60:g} min, "
            f"{sum(len(d.pods) for d in self.docs)} consumers, {len(self.docs)} documents, "
            f"{RATE:g} change/s; warm-up sample at {self.schedule.warmup:.0f} s",
            "",
            "changes written per store",
        ]
        stores: dict[str, list[Doc]] = {}
        for doc in self.docs:
            stores.setdefault(doc.store, []).append(doc)
        rows = []
        for store, docs in sorted(stores.items()):
            written = sum(len(d.checker.writes) if d.checker else 0 for d in docs)
            errors = sum(len(d.errors) for d in docs)
            relayed = sum(relay.relayed for relay in self.relays.get(store, []))
            cut = ", ".join(
                f"{o.began:.0f}-{o.ended:.0f} s" for o in self.outages if o.store == store
            )
            rows.append([store, str(len(docs)), str(written), str(errors), str(relayed),
                         cut or "-"])  # fmt: skip
        lines += _table(["store", "docs", "changes", "write errors", "connections ended",
                         "outage"], rows)  # fmt: skip
        lines += ["", "consumers by kind"]
        rows = []
        for kind in KINDS:
            docs = [d for d in self.docs if d.kind == kind]
            pods = written = seen = ended = back = 0
            for doc in docs:
                assert doc.checker is not None
                newest = doc.checker.writes[-1][0]
                back += len(doc.checker.violations())
                for pod in doc.pods:
                    pods += 1
                    written += len(doc.checker.writes)
                    gens = {s.gen for s in doc.checker.follows[pod].snapshot() if s.gen is not None}
                    seen += len(gens)
                    ended += doc.checker.shown(pod) == newest
            restarts = self.restarts([p for d in docs for p in d.pods])
            took = [self.final.get(p) for d in docs for p in d.pods]
            slowest = max((s for s in took if s is not None), default=None)
            share = f"{seen}/{written} ({100 * seen / max(written, 1):.0f} %)"
            rows.append([kind, str(pods), share, f"{ended}/{pods}", _s(slowest), str(back),
                         str(restarts)])  # fmt: skip
            if ended != pods:
                missed.append(
                    f"{kind}: {pods - ended} of {pods} consumers did not end on the newest"
                )
            if back:
                missed.append(f"{kind}: {back} sightings missing, torn or back a generation")
            if restarts:
                missed.append(f"{kind}: {restarts} container restarts")
        lines += _table(["kind", "pods", "generations seen/written", "ended on newest",
                         "last write shown (max)", "back/torn", "restarts"], rows)  # fmt: skip
        probes = self.probes
        refused = self.webhook_counts.get("refused", float("nan"))
        lines += [
            "",
            f"admissions: webhook metrics refused {refused:g} (refusals_total "
            f"{self.webhook_counts.get('refusals', float('nan')):g}), patched "
            f"{self.webhook_counts.get('patched', float('nan')):g}; dry-run probes every "
            f"{PROBE_EVERY:g} s: {probes['admitted']} injected, {probes['uninjected']} admitted "
            f"without the agent, {probes['refused']} refused by the apiserver",
        ]
        if refused != 0:
            missed.append(f"the webhook counted {refused:g} refused admissions")
        if probes["refused"] or probes["uninjected"]:
            missed.append(f"admission probes: {probes['refused']} refused, {probes['uninjected']}"
                          f" without the agent: {self.probe_refusals[:3]}")  # fmt: skip
        rotated = "; ".join(
            f"at {r.at:.0f} s: caBundle {_s(r.bundled)}, every replica {_s(r.served)}"
            + (f" ({r.error})" if r.error else "")
            for r in self.rotations
        )
        lines.append(f"rotations ({len(self.rotations)}): {rotated or 'none'}")
        missed += [f"rotation at {r.at:.0f} s: {r.error}" for r in self.rotations if r.error]
        lines += ["", "processes (RSS MiB, open fds, threads: warm-up -> end; CPU in between)"]
        rows = []
        warm, end = self.samples.get("warm-up", {}), self.samples.get("end", {})
        between = self.sampled_at.get("end", 0.0) - self.sampled_at.get("warm-up", 0.0)
        for name in self.components:
            a, b = warm.get(name), end.get(name)
            if a is None or b is None or a.pid != b.pid:
                rows.append([name, "-", "-", "-", "-", "-", "-"])
                missed.append(f"{name}: not sampled at warm-up and end in one process ({a}, {b})")
                continue
            growth = 100 * (b.rss - a.rss) / a.rss
            rows.append([name, f"{a.rss / 2**20:.1f} -> {b.rss / 2**20:.1f}", f"{growth:+.1f} %",
                         f"{a.fds} -> {b.fds}", f"{a.threads} -> {b.threads}",
                         f"{100 * (b.cpu - a.cpu) / max(between, 1):.1f} %",
                         str(b.restarts)])  # fmt: skip
            if growth > RSS_GROWTH:
                missed.append(f"{name}: RSS grew {growth:.1f} % (target <= {RSS_GROWTH:g} %)")
            if b.fds > a.fds + FLAT_FDS:
                missed.append(f"{name}: open fds {a.fds} -> {b.fds} (flat: +{FLAT_FDS} at most)")
            if b.threads > a.threads + FLAT_THREADS:
                missed.append(f"{name}: threads {a.threads} -> {b.threads} "
                              f"(flat: +{FLAT_THREADS} at most)")  # fmt: skip
        lines += _table(["component", "RSS MiB", "growth", "fds", "threads", "CPU (of a core)",
                         "restarts"], rows)  # fmt: skip
        write_errors = [f"{d.name}: {e}" for d in self.docs for e in d.errors[:2]]
        if write_errors:
            lines += ["", "write errors (first two per document):", *write_errors]
        if self.check_failures:
            lines += ["", "invariant checker:", *self.check_failures]
        if missed:
            lines += ["", "targets missed:", *missed]
        return "\n".join(lines) + "\n", missed


def _round_robin(docs: list[Doc]) -> Iterator[Doc]:
    """The documents forever, consecutive ones in different stores where there are."""
    by_store: dict[str, list[Doc]] = {}
    for doc in docs:
        by_store.setdefault(doc.store, []).append(doc)
    width = max(len(group) for group in by_store.values())
    order = [g[i] for i in range(width) for g in by_store.values() if i < len(g)]
    while True:
        yield from order


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
           for row in [headers, *rows]]  # fmt: skip
    return [out[0], "  ".join("-" * w for w in widths), *out[1:]]


def webhook_counts(release: Release) -> dict[str, float]:
    """Admissions by outcome and refusals over every reason, summed over the replicas."""
    counts: dict[str, float] = {"refusals": 0.0}
    for pod in release.webhook_pods():
        for family in text_string_to_metric_families(release.scrape(pod.metadata.name)):
            for sample in family.samples:
                if sample.name == "dynamic_config_admissions_total":
                    outcome = sample.labels["outcome"]
                    counts[outcome] = counts.get(outcome, 0.0) + sample.value
                elif sample.name == "dynamic_config_admission_refusals_total":
                    counts["refusals"] += sample.value
    return counts


def _streaming(api_client: Any, stack: contextlib.ExitStack) -> Any:
    """A ``CoreV1Api`` with a pool for every reader's log stream (the shared one keeps ten)."""
    configuration = copy.copy(api_client.configuration)
    configuration.connection_pool_maxsize = 128
    own = client.ApiClient(configuration)
    stack.callback(own.close)
    return client.CoreV1Api(own)


def _all_ready(core: Any, namespace: str, pods: list[str]) -> None:
    failures: dict[str, str] = {}

    def wait(name: str) -> None:
        try:
            wait_ready(core, namespace, name, READY_TIMEOUT)
        except AssertionError:
            failures[name] = describe(core, namespace, name)[-3000:]

    threads = [threading.Thread(target=wait, args=(name,)) for name in pods]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, "\n\n".join(f"== {n}\n{text}" for n, text in sorted(failures.items()))


def _component(release: Release, component: str) -> str:
    pods = release.core.list_namespaced_pod(
        release.namespace,
        label_selector=f"app.kubernetes.io/instance={release.name},"
        f"app.kubernetes.io/component={component}",
    ).items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return str(pods[0].metadata.name)


@pytest.fixture(scope="module")
def soak(
    install_chart: InstallChart,
    kube_node: KubeNode,
    kube_node_client: object,
    consul_server: Any,
    vault_server: Any,
    etcd_server: Any,
    etcd_auth_server: Any,
    etcd_tls_server: Any,
    redis_server: Any,
    nats_server: Any,
    s3_server: Any,
    git_server: Any,
    ssh_server: Any,
    firestore_server: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Soak]:
    """The release, every document and consumer pod Ready and observed, gen 1 everywhere."""
    servers = Servers(consul_server, vault_server, etcd_server, etcd_auth_server,
                      etcd_tls_server, redis_server, nats_server, s3_server, git_server,
                      ssh_server, firestore_server)  # fmt: skip
    began = time.monotonic()
    with install_chart(RELEASE, VALUES, skip_crds=False) as release:
        # CRDs helm installed are left, as helm leaves them: another session may use them
        namespace = release.injecting_namespace()
        release.await_injection(namespace, LABEL)
        ws = Workspace(release.core, namespace)
        try:
            with contextlib.ExitStack() as stack:
                s = SoakStores(ws, kube_node, stack)
                build(s, servers, kube_node, kube_node_client, tmp_path_factory.mktemp("soak"))
                for body in s.bodies:
                    ws.core.create_namespaced_pod(namespace, body)
                core = _streaming(ws.core.api_client, stack)
                _all_ready(core, namespace, [b["metadata"]["name"] for b in s.bodies])
                ready = time.time()
                for doc in s.docs:
                    doc.checker = FileInvariants(core, namespace, bound=BOUNDS[doc.kind],
                                                 put=doc.put, name=doc.name)  # fmt: skip
                    stack.callback(doc.checker.close)
                    doc.checker.record_write(1, ready)
                    for pod in doc.pods:
                        doc.checker.observe(pod)
                for doc in s.docs:
                    assert doc.checker is not None
                    doc.checker.check()
                components = {
                    pod.metadata.name: (release.namespace, pod.metadata.name, "webhook")
                    for pod in release.webhook_pods()
                }
                components["operator"] = (
                    release.namespace,
                    _component(release, "operator"),
                    "operator",
                )
                components["node-agent"] = (
                    release.namespace,
                    _component(release, "node-agent"),
                    "node-agent",
                )
                for doc in s.docs:
                    if doc.kind == "agent":
                        components[doc.pods[0]] = (namespace, doc.pods[0], AGENT)
                minutes = float(MINUTES)
                print(f"\nsoak: {len(s.bodies)} consumers Ready and observed "
                      f"{time.monotonic() - began:.0f} s after the fixture began; "
                      f"running {minutes:g} min")  # fmt: skip
                yield Soak(release, kube_node, ws, s.docs, s.relays, components,
                           Schedule(minutes * 60))  # fmt: skip
        finally:
            # the pods go while the node agent still runs: their volumes need its unpublish
            release.core.delete_namespace(namespace)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                try:
                    release.core.read_namespace(namespace)
                except client.ApiException:
                    break
                time.sleep(2)


def _timeout() -> int:
    return int(float(MINUTES or "0") * 60) + 3600


@pytest.mark.timeout(_timeout())
def test_every_consumer_ends_on_the_newest_generation_and_nothing_grows(soak: Soak) -> None:
    soak.run()

    text, missed = soak.report()
    path = Path(os.environ.get("DYNCONF_SOAK_REPORT") or _run_dir() / "soak-report.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"\n{text}(also in {path})")

    assert missed == [], text
