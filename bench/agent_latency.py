"""The agent as the cluster runs it: change-to-file latency, RSS, idle CPU, init start time.

Run from the repo root: ``uv run python bench/agent_latency.py [stores…]`` (default: file
consul etcd redis; also vault git config-server nats s3 firestore — the config server runs in
this process). Uses the servers ``scripts/testenv`` publishes (starting, and afterwards
stopping, any that are not running). For each store a fresh ``dynamic-config-agent --watch 15``
subprocess renders one key; then 50 writes, one at a time, each timed from just before the write
to the moment the renamed file holds the new value (target p95 <= 250 ms); poll stores (vault,
git, s3) are asked every 15 s, so their latency is the interval and is not measured. RSS is read from
``/proc`` after the first render (target <= 48 MiB; s3 and firestore <= 96 MiB). Idle CPU is the
process's CPU time over 10 s of no changes at ``--watch 15`` (target <= 1 % of a core). One-shot
start-to-first-render is the wall time of an init run against the file store (target <= 1.5 s).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = Path(os.environ.get("DYNCONF_TESTENV_RUN", REPO / ".testenv"))
"""Where ``scripts/testenv`` publishes its servers (``DYNCONF_TESTENV_RUN`` shares another
checkout's, as the tests do)."""
AGENT = Path(sys.executable).with_name("dynamic-config-agent")
CHANGES = 50
POLL_STORES = {"vault", "git", "s3"}
"""Asked every --watch seconds (15 here): their change-to-file time is the interval, not measured."""
AGENT_ENV: dict[str, str] = {}
"""Variables the next agent gets (credentials the harness set up); reset per store."""
SERVERS: list[object] = []
CLEANUPS: list[Callable[[], object]] = []


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


def stop_started(started: list[str]) -> None:
    """Stop the servers :func:`server_env` started (a server that was running stays)."""
    for name in started:
        subprocess.run(
            [sys.executable, str(REPO / "scripts/testenv"), "stop", name],
            check=False,
            capture_output=True,
        )


def store(name: str, started: list[str], tmp: Path) -> tuple[list[str], Callable[[str], None]]:
    """Agent arguments for one store and a function writing a document into it."""
    key = f"bench/{uuid.uuid4().hex}.json"
    if name == "file":
        doc = tmp / "doc.json"

        def write_file(text: str) -> None:
            scratch = tmp / ".doc.tmp"
            scratch.write_text(text)
            scratch.replace(doc)

        return ["--key", str(doc)], write_file
    if name == "consul":
        import consul

        env = server_env("consul", started)
        host, _, port = env["DYNCONF_TEST_CONSUL_ADDR"].rpartition(":")
        kv = consul.Consul(host=host, port=int(port)).kv
        return ["--endpoint", env["DYNCONF_TEST_CONSUL_URL"], "--key", key], lambda t: kv.put(
            key, t
        )
    if name == "etcd":
        from etcd3gw.client import Etcd3Client

        env = server_env("etcd", started)
        client = Etcd3Client(
            host=env["DYNCONF_TEST_ETCD_HOST"], port=int(env["DYNCONF_TEST_ETCD_PORT"])
        )
        return ["--endpoint", env["DYNCONF_TEST_ETCD_URL"], "--key", key], lambda t: client.put(
            key, t
        )
    if name == "redis":
        import redis

        env = server_env("redis", started)
        client = redis.Redis.from_url(env["DYNCONF_TEST_REDIS_URL"])
        return ["--endpoint", env["DYNCONF_TEST_REDIS_URL"], "--key", key], lambda t: client.set(
            key, t
        )
    if name == "vault":
        import hvac

        env = server_env("vault", started)
        addr, token = env["DYNCONF_TEST_VAULT_ADDR"], env["DYNCONF_TEST_VAULT_TOKEN"]
        kv = hvac.Client(url=addr, token=token).secrets.kv.v2
        path = f"bench-{uuid.uuid4().hex}"
        AGENT_ENV["DYNAMIC_CONFIG_AGENT_TOKEN"] = token
        return (
            ["--endpoint", addr, "--key", f"secret/{path}"],
            lambda t: kv.create_or_update_secret(
                path=path, secret=json.loads(t), mount_point="secret"
            ),
        )
    if name == "git":
        env = server_env("git", started)
        path = f"bench/{uuid.uuid4().hex}.json"
        repo = Path(env["DYNCONF_TEST_GIT_ROOT"]) / "config.git"
        AGENT_ENV["XDG_CACHE_HOME"] = str(tmp / "cache")
        return (
            ["--endpoint", env["DYNCONF_TEST_GIT_HTTP_URL"], "--key", path],
            lambda t: git_commit(repo, env["DYNCONF_TEST_GIT_BRANCH"], path, t, tmp),
        )
    if name == "nats":
        import asyncio

        import nats
        from nats.js.api import KeyValueConfig

        env = server_env("nats", started)
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        loop = asyncio.new_event_loop()
        client = loop.run_until_complete(nats.connect(env["DYNCONF_TEST_NATS_URL"]))
        kv = loop.run_until_complete(
            client.jetstream().create_key_value(KeyValueConfig(bucket=bucket))
        )
        CLEANUPS.append(lambda: loop.run_until_complete(client.close()))
        return (
            ["--endpoint", env["DYNCONF_TEST_NATS_URL"], "--key", f"{bucket}/app.json"],
            lambda t: loop.run_until_complete(kv.put("app.json", t.encode())),
        )
    if name == "s3":
        import boto3

        env = server_env("s3", started)
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        client = boto3.client(
            "s3",
            endpoint_url=env["DYNCONF_TEST_S3_ENDPOINT_URL"],
            aws_access_key_id=env["DYNCONF_TEST_S3_ACCESS_KEY_ID"],
            aws_secret_access_key=env["DYNCONF_TEST_S3_SECRET_ACCESS_KEY"],
            region_name=env["DYNCONF_TEST_S3_REGION"],
        )
        client.create_bucket(Bucket=bucket)
        AGENT_ENV.update(
            AWS_ACCESS_KEY_ID=env["DYNCONF_TEST_S3_ACCESS_KEY_ID"],
            AWS_SECRET_ACCESS_KEY=env["DYNCONF_TEST_S3_SECRET_ACCESS_KEY"],
            AWS_EC2_METADATA_DISABLED="true",
        )
        return (
            [
                "--endpoint",
                bucket,
                "--key",
                "app.json",
                "--api-url",
                env["DYNCONF_TEST_S3_ENDPOINT_URL"],
            ],
            lambda t: client.put_object(Bucket=bucket, Key="app.json", Body=t.encode()),
        )
    if name == "firestore":
        from google.cloud import firestore

        env = server_env("firestore", started)
        host, project = (
            env["DYNCONF_TEST_FIRESTORE_EMULATOR_HOST"],
            env["DYNCONF_TEST_FIRESTORE_PROJECT"],
        )
        os.environ["FIRESTORE_EMULATOR_HOST"] = host  # for this process's client only
        AGENT_ENV["FIRESTORE_EMULATOR_HOST"] = ""
        doc_id = uuid.uuid4().hex
        ref = firestore.Client(project=project).collection("bench").document(doc_id)
        return (
            [
                "--endpoint",
                project,
                "--key",
                f"bench/{doc_id}",
                "--auth",
                "emulator",
                "--api-url",
                host,
            ],
            lambda t: ref.set(json.loads(t)),
        )
    if name == "config-server":
        from dynconf_store_configserver.server.main import build_server
        from dynconf_store_configserver.server.settings import parse_settings

        doc = tmp / "app.json"
        doc.write_text("{}")
        token = f"bench-{uuid.uuid4().hex}"
        settings = parse_settings(
            {
                "server": {
                    "bind": "127.0.0.1:0",
                    "file_poll_seconds": 0.05,
                    "keepalive_seconds": 15.0,
                    "sections": [
                        {
                            "application": "app",
                            "profile": "prod",
                            "files": ["app.json"],
                            "whole_document": True,
                        }
                    ],
                    "clients": [{"name": "bench", "token": token, "applications": ["app"]}],
                }
            },
            base=tmp,
        )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = build_server(settings, port=port, drain_seconds=1)
        threading.Thread(target=server.run, daemon=True).start()
        while not server.started:
            time.sleep(0.02)
        SERVERS.append(server)
        AGENT_ENV["DYNAMIC_CONFIG_AGENT_TOKEN"] = token

        def write_doc(text: str) -> None:
            scratch = tmp / ".app.json.tmp"
            scratch.write_text(text)
            scratch.replace(doc)

        return ["--endpoint", f"http://127.0.0.1:{port}", "--key", "app/prod"], write_doc
    raise SystemExit(f"no bench harness for {name}")


def git_commit(repo: Path, branch: str, path: str, content: str, tmp: Path) -> None:
    """Commit one file on the bare repo's branch with plumbing (no clone)."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@dynconf.test",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@dynconf.test",
        "GIT_INDEX_FILE": str(tmp / ".bench-index"),
    }

    def git(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            input=stdin,
            env=env,
            text=True,
            check=True,
            capture_output=True,
        ).stdout.strip()

    parent = git("rev-parse", f"refs/heads/{branch}")
    git("read-tree", parent)
    blob = git("hash-object", "-w", "--stdin", stdin=content)
    git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    commit = git("commit-tree", git("write-tree"), "-p", parent, "-m", "bench")
    git("update-ref", f"refs/heads/{branch}", commit, parent)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(path: Path, text: str, timeout: float = 10.0) -> float:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        try:
            if text in path.read_text():
                return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.001)
    raise TimeoutError(f"{path} never held {text}")


def bench_store(name: str, started: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        AGENT_ENV.clear()
        args, write = store(name, started, tmp)
        out = tmp / "out" / "app.json"
        out.parent.mkdir()
        write(json.dumps({"n": -1}))
        env = {**os.environ, **AGENT_ENV}
        env = {k: v for k, v in env.items() if v}
        proc = subprocess.Popen(
            [str(AGENT), "--source", name, *args, "--out", str(out), "--watch", "15"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            wait_for(out, '"n": -1')
            time.sleep(1.0)  # let the watch open and settle before measuring
            rss = rss_mib(proc.pid)
            before = cpu_seconds(proc.pid)
            time.sleep(10.0)
            idle = (cpu_seconds(proc.pid) - before) / 10.0 * 100
            if name in POLL_STORES:
                return {
                    "store": name,
                    "p50_ms": None,
                    "p95_ms": None,
                    "rss_mib": round(rss, 1),
                    "idle_cpu_pct": round(idle, 2),
                }
            samples = []
            for n in range(CHANGES):
                began = time.perf_counter()
                write(json.dumps({"n": n}))
                samples.append((wait_for(out, f'"n": {n}\n') - began) * 1000)
            samples.sort()
            return {
                "store": name,
                "p50_ms": round(statistics.median(samples), 1),
                "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 1),
                "rss_mib": round(rss, 1),
                "idle_cpu_pct": round(idle, 2),
            }
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            for server in SERVERS:
                server.should_exit = True  # type: ignore[attr-defined]
            SERVERS.clear()
            while CLEANUPS:
                CLEANUPS.pop()()


def one_shot_start() -> float:
    with tempfile.TemporaryDirectory() as directory:
        doc = Path(directory) / "doc.yaml"
        doc.write_text("a: 1\n")
        runs = []
        for _ in range(5):
            began = time.perf_counter()
            subprocess.run(
                [
                    str(AGENT),
                    "--source",
                    "file",
                    "--key",
                    str(doc),
                    "--out",
                    str(Path(directory) / "app.json"),
                ],
                check=True,
                capture_output=True,
            )
            runs.append(time.perf_counter() - began)
        return round(statistics.median(runs), 3)


def main() -> None:
    stores = sys.argv[1:] or ["file", "consul", "etcd", "redis"]
    started: list[str] = []
    try:
        for name in stores:
            print(json.dumps(bench_store(name, started)))
        print(json.dumps({"one_shot_start_to_first_render_s": one_shot_start()}))
    finally:
        stop_started(started)


if __name__ == "__main__":
    main()
