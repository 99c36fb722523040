"""The node agent at its reason for being: many pods on one node reading one document.

Run from the repo root: ``uv run python bench/node_agent.py [--volumes 100] [--sidecars 100]
[--rounds 20]``. Uses the Redis server ``scripts/testenv`` publishes (starting, and afterwards
stopping, it when it is not running). One ``dynamic-config-node-agent`` publishes ``--volumes``
inline volumes of one Redis key over its CSI socket, then reports:

* open store connections — TCP connections from the node agent's process to Redis, read from
  ``/proc`` (target: one document's worth, however many volumes), and the keyspace
  subscriptions (``PUBSUB NUMSUB``: watches open, target 1);
* RSS of the node agent with every volume published (target <= 96 MiB);
* time from a write to Redis until all volumes' files hold the new value, over ``--rounds``
  writes (target p95 <= 1 s);
* the summed RSS of ``--sidecars`` ``dynamic-config-agent --watch 15`` processes reading the
  same key the same way, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / ".testenv"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "packages" / "dynconf-k8s" / "src"))

from dynconf_k8s.node._generated import csi_pb2 as csi  # noqa: E402


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


def tcp_connections(pid: int, port: int) -> int:
    """Established TCP connections of ``pid`` whose remote port is ``port``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            remote, state, inode = parts[2], parts[3], parts[9]
            if state == "01" and inode in inodes and int(remote.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
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


def publish(channel: grpc.Channel, target: Path, url: str, key: str, index: int) -> None:
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
            volume_context={"source": "redis", "endpoint": url, "key": key, "path": "c.json"},
        ),
        timeout=30,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--volumes", type=int, default=100)
    parser.add_argument("--sidecars", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()

    import redis

    started: list[str] = []
    env = server_env("redis", started)
    url = env["DYNCONF_TEST_REDIS_URL"]
    port = int(env["DYNCONF_TEST_REDIS_PORT"])
    client = redis.Redis.from_url(url)
    key = f"bench/{uuid.uuid4().hex[:8]}/config.json"
    client.set(key, json.dumps({"port": 0}))
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
            publish(channel, targets[-1], url, key, index)
        publish_seconds = time.monotonic() - begin
        wait_for(lambda: client.pubsub_numsub(f"__keyspace@0__:{key}")[0][1] == 1, what="watch")
        connections = tcp_connections(agent.pid, port)
        watches = client.pubsub_numsub(f"__keyspace@0__:{key}")[0][1]
        node_rss = rss_mib(agent.pid)

        samples = []
        for round_ in range(1, args.rounds + 1):
            marker = f'"port": {round_}'
            start = time.monotonic()
            client.set(key, json.dumps({"port": round_}))
            wait_for(lambda m=marker: all(holds(t / "c.json", m) for t in targets), what="files")
            samples.append(time.monotonic() - start)
        samples.sort()
        p50 = samples[len(samples) // 2]
        p95 = samples[(len(samples) * 95 - 1) // 100]

        print(f"volumes                      {args.volumes} (published in {publish_seconds:.2f} s)")
        print(f"store connections (TCP)      {connections}")
        print(f"store watches (NUMSUB)       {watches}   target 1")
        print(f"node agent RSS               {node_rss:.1f} MiB   target <= 96 MiB")
        print(f"change -> all files p50      {p50 * 1000:.0f} ms")
        print(f"change -> all files p95      {p95 * 1000:.0f} ms   target <= 1000 ms")
        print(f"change -> all files max      {samples[-1] * 1000:.0f} ms")
        channel.close()

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
                        "--source",
                        "redis",
                        "--endpoint",
                        url,
                        "--key",
                        key,
                        "--out",
                        str(out),
                        "--watch",
                        "15",
                    ],
                    env={**os.environ, "RUST_LOG": "warn"},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                processes.append(proc)
                sidecars.append((proc, out))
            for _proc, out in sidecars:
                wait_for(out.exists, timeout=300, what="sidecar files")
            wait_for(
                lambda: client.pubsub_numsub(f"__keyspace@0__:{key}")[0][1] >= 1 + args.sidecars,
                timeout=300,
                what="sidecar watches",
            )
            sidecar_rss = sum(rss_mib(proc.pid) for proc, _out in sidecars)
            sidecar_connections = sum(tcp_connections(proc.pid, port) for proc, _out in sidecars)
            print(
                f"{args.sidecars} sidecars summed RSS     {sidecar_rss:.1f} MiB "
                f"({sidecar_rss / args.sidecars:.1f} MiB each), "
                f"{sidecar_connections} store connections"
            )
            print(f"sidecars / node agent RSS    {sidecar_rss / node_rss:.1f}x")
        print(
            json.dumps(
                {
                    "volumes": args.volumes,
                    "connections": connections,
                    "watches": watches,
                    "node_rss_mib": round(node_rss, 1),
                    "p50_ms": round(p50 * 1000),
                    "p95_ms": round(p95 * 1000),
                    "sidecars": args.sidecars,
                    "sidecar_rss_mib": round(sidecar_rss, 1),
                    "sidecar_connections": sidecar_connections,
                    "ratio": round(sidecar_rss / node_rss, 1) if args.sidecars else None,
                }
            )
        )
    finally:
        for proc in processes:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in processes:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
        client.delete(key)
        subprocess.run(["rm", "-rf", str(root)], check=False)
        for name in started:
            subprocess.run(
                [sys.executable, str(REPO / "scripts/testenv"), "stop", name],
                check=False,
                capture_output=True,
            )


if __name__ == "__main__":
    main()
