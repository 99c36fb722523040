"""The node agent at its reason for being: many pods on one node reading one document.

Run from the repo root: ``uv run python bench/node_agent.py [--stores redis,nats,consul]
[--volumes 100] [--documents 1] [--sidecars 100] [--rounds 20] [--watch 15]``; issue 19's
shape is ``--volumes 500 --documents 50``. Uses the servers ``scripts/testenv`` publishes
(starting, and afterwards stopping, any that is not running). For each store, one
``dynamic-config-node-agent`` publishes ``--volumes`` inline volumes over its CSI socket
(``watch-seconds`` = ``--watch``), volume ``i`` reading document ``i % --documents``, then
reports:

* open store connections, counted at the server: every client connection the server holds
  (Redis ``CLIENT LIST``, NATS ``/connz``, and for Consul — whose API lists no connections —
  the established sockets of the Consul process on its HTTP port, what ``ss -tn sport = :PORT``
  shows), attributed to the node agent by matching each connection's client address with the
  agent's own sockets. Counted right after publishing and again once a resync interval has
  passed, because a push store's resync is a read beside the watch (target: one per
  document at most);
* the watches the server holds for the documents, where it counts them (Redis
  ``PUBSUB NUMSUB`` of the keyspace channels, NATS consumers on the bucket's stream; target:
  one per document);
* RSS of the node agent with every volume published (target <= 96 MiB; <= 128 MiB from 500
  volumes);
* time from writing every document to the store until all volumes' files hold the new
  value, over ``--rounds`` rounds (target p95 <= 1 s);
* the summed RSS of ``--sidecars`` ``dynamic-config-agent --watch N`` processes reading the
  documents the same way, their connections counted at the server (after a resync interval
  too), and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import grpc

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / ".testenv"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "packages" / "dynconf-k8s" / "src"))
sys.path.insert(0, str(REPO / "bench"))

from results import record  # noqa: E402

from dynconf_k8s.node._generated import csi_pb2 as csi  # noqa: E402

Address = tuple[str, int]


def server_env(name: str, started: list[str]) -> dict[str, str]:
    published = RUN / "published" / f"{name}.env"
    if not published.exists():
        subprocess.run(
            [sys.executable, str(REPO / "scripts/testenv"), "start", name],
            check=True,
            capture_output=True,
        )
        started.append(name)
    return dict(line.split("=", 1) for line in published.read_text().split())


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# ---------------------------------------------------------------------------- sockets
def _address(text: str) -> Address:
    """``0100007F:1F90`` (``/proc/net/tcp``'s little-endian words) as ``("127.0.0.1", 8080)``."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    # each 32-bit word is in host (little-endian) order
    packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(packed)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port, 16)


def established(pid: int) -> list[tuple[Address, Address]]:
    """``(local, remote)`` of every established TCP socket ``pid`` holds."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "01" and parts[9] in inodes:
                found.append((_address(parts[1]), _address(parts[2])))
    return found


def client_addresses(pids: Iterable[int]) -> set[Address]:
    """The local addresses of the processes' TCP connections (what a server sees as peers)."""
    return {local for pid in pids for local, _remote in established(pid)}


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def holds(path: Path, text: str) -> bool:
    try:
        return text in path.read_text()
    except OSError:
        return False


def all_hold(targets: list[Path], text: str) -> bool:
    return all(holds(target / "c.json", text) for target in targets)


def http_json(url: str, method: str = "GET", data: bytes | None = None) -> Any:
    request = urllib.request.Request(url, data=data, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


# ---------------------------------------------------------------------------- stores
class Store:
    """One server, ``documents`` documents on it, and how to count what its clients hold open."""

    name = ""
    counted_by = ""

    def __init__(self, documents: int) -> None:
        self.documents = documents
        self.prefix = f"bench/{uuid.uuid4().hex[:8]}"

    def key(self, document: int) -> str:
        return f"{self.prefix}/config-{document}.json"

    def volume(self, document: int) -> dict[str, str]:
        """The volume attributes (and agent flags) naming one document."""
        raise NotImplementedError

    def write(self, text: str, document: int) -> None:
        raise NotImplementedError

    def peers(self) -> set[Address]:
        """The client address of every connection the server holds open, as it reports them."""
        raise NotImplementedError

    def watches(self) -> int | None:
        """Watches of the documents the server counts, or None when it counts none."""
        return None

    def close(self) -> None:
        """Delete the document and close the bench's own client."""

    def connections(self, pids: Iterable[int]) -> int:
        return len(self.peers() & client_addresses(pids))

    def sidecar_args(self, document: int) -> list[str]:
        attrs = self.volume(document)
        return ["--source", attrs["source"], "--endpoint", attrs["endpoint"], "--key", attrs["key"]]


class RedisStore(Store):
    name = "redis"
    counted_by = "CLIENT LIST"

    def __init__(self, started: list[str], documents: int) -> None:
        import redis

        super().__init__(documents)
        env = server_env("redis", started)
        self.url = env["DYNCONF_TEST_REDIS_URL"]
        self.client: Any = redis.Redis.from_url(self.url)

    def volume(self, document: int) -> dict[str, str]:
        return {"source": "redis", "endpoint": self.url, "key": self.key(document)}

    def write(self, text: str, document: int) -> None:
        self.client.set(self.key(document), text)

    def peers(self) -> set[Address]:
        found = set()
        for client in self.client.client_list():
            host, _, port = str(client["addr"]).rpartition(":")
            found.add((host.strip("[]"), int(port)))
        return found

    def watches(self) -> int:
        channels = [f"__keyspace@0__:{self.key(d)}" for d in range(self.documents)]
        return sum(int(count) for _channel, count in self.client.pubsub_numsub(*channels))

    def close(self) -> None:
        self.client.delete(*(self.key(d) for d in range(self.documents)))
        self.client.close()


class NatsStore(Store):
    name = "nats"
    counted_by = "/connz"

    def __init__(self, started: list[str], documents: int) -> None:
        super().__init__(documents)
        env = server_env("nats", started)
        self.url = env["DYNCONF_TEST_NATS_URL"]
        self.monitor = env["DYNCONF_TEST_NATS_MONITOR_URL"]
        self.bucket = f"bench-{uuid.uuid4().hex[:8]}"
        self.loop = asyncio.new_event_loop()
        self.kv: Any = self.loop.run_until_complete(self._open())

    async def _open(self) -> Any:
        import nats

        self.nc = await nats.connect(self.url, connect_timeout=5)
        return await self.nc.jetstream().create_key_value(bucket=self.bucket)

    def volume(self, document: int) -> dict[str, str]:
        key = f"{self.bucket}/config-{document}.json"
        return {"source": "nats", "endpoint": self.url, "key": key}

    def write(self, text: str, document: int) -> None:
        self.loop.run_until_complete(self.kv.put(f"config-{document}.json", text.encode()))

    def peers(self) -> set[Address]:
        body = http_json(f"{self.monitor}/connz?limit=100000")
        return {(c["ip"], int(c["port"])) for c in body.get("connections") or []}

    def watches(self) -> int:
        body = http_json(f"{self.monitor}/jsz?accounts=true&streams=true")
        for account in body.get("account_details") or []:
            for stream in account.get("stream_detail") or []:
                if stream["name"] == f"KV_{self.bucket}":
                    return int(stream["state"].get("consumer_count", 0))
        return 0

    def close(self) -> None:
        async def drop() -> None:
            await self.nc.jetstream().delete_key_value(self.bucket)
            await self.nc.close()

        self.loop.run_until_complete(drop())
        self.loop.close()


class ConsulStore(Store):
    name = "consul"
    counted_by = "the Consul process's sockets on its HTTP port"

    def __init__(self, started: list[str], documents: int) -> None:
        super().__init__(documents)
        env = server_env("consul", started)
        self.url = env["DYNCONF_TEST_CONSUL_URL"]
        self.port = int(env["DYNCONF_TEST_CONSUL_ADDR"].rpartition(":")[2])
        pids = (RUN / "groups" / "consul").read_text().split()
        self.server_pids = [int((RUN / "pids" / f"{p}.pid").read_text()) for p in pids]

    def volume(self, document: int) -> dict[str, str]:
        return {"source": "consul", "endpoint": self.url, "key": self.key(document)}

    def write(self, text: str, document: int) -> None:
        http_json(f"{self.url}/v1/kv/{self.key(document)}", "PUT", text.encode())

    def peers(self) -> set[Address]:
        return {
            remote
            for pid in self.server_pids
            for local, remote in established(pid)
            if local[1] == self.port
        }

    def close(self) -> None:
        http_json(f"{self.url}/v1/kv/{self.prefix}?recurse=true", "DELETE")


STORES: dict[str, Callable[[list[str], int], Store]] = {
    "redis": RedisStore,
    "nats": NatsStore,
    "consul": ConsulStore,
}


# ---------------------------------------------------------------------------- one store
def publish(channel: grpc.Channel, target: Path, attributes: dict[str, str], index: int) -> None:
    call = channel.unary_unary(
        "/csi.v1.Node/NodePublishVolume",
        request_serializer=csi.NodePublishVolumeRequest.SerializeToString,
        response_deserializer=csi.NodePublishVolumeResponse.FromString,
    )
    call(
        csi.NodePublishVolumeRequest(
            volume_id=f"vol-{index}",
            target_path=str(target),
            volume_capability=csi.VolumeCapability(mount=csi.VolumeCapability.MountVolume()),
            volume_context={**attributes, "path": "c.json"},
        ),
        timeout=30,
    )


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for proc in processes:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
    for proc in processes:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    processes.clear()


def write_all(store: Store, text: str) -> None:
    for document in range(store.documents):
        store.write(text, document)


def bench_store(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    write_all(store, json.dumps({"port": 0}))
    documents = store.documents
    rss_target = 128 if args.volumes >= 500 else 96
    root = Path(tempfile.mkdtemp(prefix="dcnb-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        socket = root / "plugin" / "csi.sock"
        socket.parent.mkdir()
        agent = subprocess.Popen(
            [
                str(BIN / "dynamic-config-node-agent"),
                "--endpoint",
                f"unix://{socket}",
                "--state-dir",
                str(root / "plugin" / "volumes"),
            ],
            env={**os.environ, "KUBE_NODE_NAME": "bench", "RUST_LOG": "warn"},
            stdout=subprocess.DEVNULL,
        )
        processes.append(agent)
        wait_for(socket.exists, what="the CSI socket")
        channel = grpc.insecure_channel(f"unix://{socket}")
        targets = []
        begin = time.monotonic()
        for index in range(args.volumes):
            parent = root / "pods" / f"pod-{index}" / "volumes" / "kubernetes.io~csi" / "config"
            parent.mkdir(parents=True)
            targets.append(parent / "mount")
            attributes = {**store.volume(index % documents), "watch-seconds": str(args.watch)}
            publish(channel, targets[-1], attributes, index)
        published = time.monotonic()
        if store.watches() is not None:
            wait_for(lambda: store.watches() == documents, what="the watches")
        else:
            time.sleep(0.5)  # the watch's first (priming) query
        at_publish = store.connections([agent.pid])

        samples = []
        for round_ in range(1, args.rounds + 1):
            marker = f'"port": {round_}'
            start = time.monotonic()
            write_all(store, json.dumps({"port": round_}))
            wait_for(partial(all_hold, targets, marker), what="files")
            samples.append(time.monotonic() - start)
        samples.sort()
        p50 = samples[len(samples) // 2]
        p95 = samples[(len(samples) * 95 - 1) // 100]

        # a push store is re-read every interval beside its watch: count again after one
        settle = published + args.watch * 1.5 + 1 - time.monotonic()
        if settle > 0:
            time.sleep(settle)
        after_resync = store.connections([agent.pid])
        watches = store.watches()
        node_rss = rss_mib(agent.pid)
        channel.close()

        name = store.name
        shown_watches = "n/a (the server counts none)" if watches is None else str(watches)
        print(f"[{name}] volumes                      {args.volumes} of {documents} "
              f"document(s) (published in {published - begin:.2f} s)")  # fmt: skip
        print(f"[{name}] store connections (server)   {at_publish} after publish, "
              f"{after_resync} after a resync interval   target <= {documents}   "
              f"(counted by {store.counted_by})")  # fmt: skip
        print(f"[{name}] store watches (server)       {shown_watches}   target {documents}")
        print(f"[{name}] node agent RSS               {node_rss:.1f} MiB   "
              f"target <= {rss_target} MiB")  # fmt: skip
        print(f"[{name}] change -> all files p50      {p50 * 1000:.0f} ms")
        print(f"[{name}] change -> all files p95      {p95 * 1000:.0f} ms   target <= 1000 ms")
        print(f"[{name}] change -> all files max      {samples[-1] * 1000:.0f} ms")
        stop(processes)

        sidecar_rss = 0.0
        sidecar_connections = 0
        if args.sidecars:
            sidecars = []
            for index in range(args.sidecars):
                out = root / "sidecars" / f"{index}" / "c.json"
                out.parent.mkdir(parents=True)
                proc = subprocess.Popen(
                    [
                        str(BIN / "dynamic-config-agent"),
                        *store.sidecar_args(index % documents),
                        "--out",
                        str(out),
                        "--watch",
                        str(args.watch),
                    ],
                    env={**os.environ, "RUST_LOG": "warn"},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                processes.append(proc)
                sidecars.append((proc, out))
            for _proc, out in sidecars:
                wait_for(out.exists, timeout=300, what="sidecar files")
            pids = [proc.pid for proc, _out in sidecars]
            if store.watches() is not None:
                wait_for(
                    lambda: (store.watches() or 0) >= args.sidecars,
                    timeout=300,
                    what="sidecar watches",
                )
            else:
                wait_for(
                    lambda: store.connections(pids) >= args.sidecars,
                    timeout=300,
                    what="sidecar connections",
                )
            time.sleep(args.watch * 1.5 + 1)  # past a resync, as the node agent was counted
            sidecar_rss = sum(rss_mib(pid) for pid in pids)
            sidecar_connections = store.connections(pids)
            print(
                f"[{name}] {args.sidecars} sidecars summed RSS     {sidecar_rss:.1f} MiB "
                f"({sidecar_rss / args.sidecars:.1f} MiB each), "
                f"{sidecar_connections} store connections (server)"
            )
            print(f"[{name}] sidecars / node agent RSS    {sidecar_rss / node_rss:.1f}x")
        return {
            "store": name,
            "volumes": args.volumes,
            "documents": documents,
            "connections": after_resync,
            "connections_after_publish": at_publish,
            "watches": watches,
            "node_rss_mib": round(node_rss, 1),
            "p50_ms": round(p50 * 1000),
            "p95_ms": round(p95 * 1000),
            "sidecars": args.sidecars,
            "sidecar_rss_mib": round(sidecar_rss, 1),
            "sidecar_connections": sidecar_connections,
            "ratio": round(sidecar_rss / node_rss, 1) if args.sidecars else None,
        }
    finally:
        stop(processes)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", default="redis,nats,consul")
    parser.add_argument("--volumes", type=int, default=100)
    parser.add_argument("--documents", type=int, default=1, help="volume i reads document i % N")
    parser.add_argument("--sidecars", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--watch", type=int, default=15, help="watch-seconds / --watch")
    args = parser.parse_args()
    names = [n.strip() for n in args.stores.split(",") if n.strip()]
    unknown = [n for n in names if n not in STORES]
    if unknown:
        raise SystemExit(f"unknown store {', '.join(unknown)}; choose from {', '.join(STORES)}")

    started: list[str] = []
    results = []
    try:
        for name in names:
            store = STORES[name](started, max(1, min(args.documents, args.volumes)))
            try:
                results.append(bench_store(store, args))
            finally:
                store.close()
        for result in results:
            print(json.dumps(result))
            shape = f"{result['store']}.v{result['volumes']}_d{result['documents']}"
            record("node_agent", {
                f"{shape}.{figure}": value
                for figure, value in result.items()
                if isinstance(value, int | float) and figure not in ("volumes", "documents")
            })  # fmt: skip
    finally:
        for name in started:
            subprocess.run(
                [sys.executable, str(REPO / "scripts/testenv"), "stop", name],
                check=False,
                capture_output=True,
            )


if __name__ == "__main__":
    main()
