"""The agent against the real stores from ``scripts/testenv``: render, follow, survive faults.

Each store gets the same three checks — a change reaches the file (the change-to-file time is
recorded as a test property), a deletion moves ``absent`` and a re-creation renders again, and
a store that goes away mid-watch (a loopback proxy cut in front of the real server, so the
session's shared server is not disturbed) is followed again once it is back. Stores whose
plugin is not installed yet are skipped by name.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from dynconf.plugins import discover
from tests.fixtures.relay import Relay

from .conftest import AgentProcess, wait_file, wait_for

Start = Callable[..., AgentProcess]
STORES = set(discover().stores)
CONFIG_SERVER_TOKEN = "agent-tests-token-0123456789abcdef01234567"


def needs_store(name: str) -> None:
    if name not in STORES:
        pytest.skip(f"the {name} store plugin is not installed yet")


@dataclass
class Harness:
    """How to reach one store and change the document in it."""

    name: str
    endpoint: str
    key: str
    put: Callable[[dict[str, Any]], None]
    delete: Callable[[], None]
    host: str
    port: int
    args: tuple[str, ...] = ()
    token: str = ""
    env: dict[str, str | None] = field(default_factory=dict)

    def via(self, proxy: Relay) -> tuple[str, tuple[str, ...]]:
        """The endpoint and store arguments with the server's address swapped for the proxy's.

        The address rides ``--endpoint`` for most stores and ``--api-url`` for s3 and
        firestore; both are rewritten.
        """
        here, there = f"{self.host}:{self.port}", f"127.0.0.1:{proxy.port}"
        return self.endpoint.replace(here, there), tuple(a.replace(here, there) for a in self.args)


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url if "://" in url else f"tcp://{url}")
    assert parts.hostname and parts.port, url
    return parts.hostname, parts.port


@pytest.fixture
def consul(consul_server: Any) -> Iterator[Harness]:
    needs_store("consul")
    key = f"agent/{uuid.uuid4().hex}.json"
    kv = consul_server.client.kv
    yield Harness(
        "consul",
        consul_server.url,
        key,
        lambda d: kv.put(key, json.dumps(d)),
        lambda: kv.delete(key),
        consul_server.host,
        consul_server.port,
    )
    kv.delete(key)


@pytest.fixture
def etcd(etcd_server: Any) -> Iterator[Harness]:
    needs_store("etcd")
    key = f"agent/{uuid.uuid4().hex}.json"
    client = etcd_server.client
    yield Harness(
        "etcd",
        etcd_server.url,
        key,
        lambda d: client.put(key, json.dumps(d)),
        lambda: client.delete(key),
        etcd_server.host,
        etcd_server.port,
    )
    client.delete(key)


@pytest.fixture
def redis(redis_server: Any) -> Iterator[Harness]:
    needs_store("redis")
    key = f"agent/{uuid.uuid4().hex}.json"
    client = redis_server.client
    yield Harness(
        "redis",
        redis_server.url,
        key,
        lambda d: client.set(key, json.dumps(d)),
        lambda: client.delete(key),
        redis_server.host,
        redis_server.port,
    )
    client.delete(key)


@pytest.fixture
def vault_kv(vault_server: Any) -> Iterator[Harness]:
    needs_store("vault")
    path = f"agent-{uuid.uuid4().hex}"
    kv = vault_server.client.secrets.kv.v2
    host, port = _host_port(vault_server.addr)
    yield Harness(
        "vault",
        vault_server.addr,
        f"secret/{path}",
        lambda d: kv.create_or_update_secret(path=path, secret=d, mount_point="secret"),
        lambda: kv.delete_metadata_and_all_versions(path=path, mount_point="secret"),
        host,
        port,
        token=vault_server.token,
    )
    kv.delete_metadata_and_all_versions(path=path, mount_point="secret")


@pytest.fixture
def firestore(firestore_server: Any) -> Iterator[Harness]:
    needs_store("firestore")
    doc_id = uuid.uuid4().hex
    ref = firestore_server.client.collection("agent").document(doc_id)
    host, port = _host_port(firestore_server.emulator_host)
    # the emulator now and then answers the first call after a cut stream CANCELLED (499),
    # whether that call is the test's write or the clean-up: both are idempotent, so the
    # harness retries them on that, as on the other transient codes
    from google.api_core import exceptions, retry

    transient = retry.Retry(
        predicate=retry.if_exception_type(
            exceptions.Cancelled, exceptions.ServiceUnavailable, exceptions.DeadlineExceeded
        ),
        timeout=30,
    )
    # the session sets FIRESTORE_EMULATOR_HOST for its own client; the agent must reach the
    # emulator through --api-url alone, so a proxy in front of it is what the agent talks to
    yield Harness(
        "firestore",
        firestore_server.project,
        f"agent/{doc_id}",
        functools.partial(ref.set, retry=transient),
        functools.partial(ref.delete, retry=transient),
        host,
        port,
        args=("--auth", "emulator", "--api-url", firestore_server.emulator_host),
        env={"FIRESTORE_EMULATOR_HOST": None},
    )
    ref.delete(retry=transient)


def _git(repo: Path, root: Path, *args: str, stdin: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "tests",
        "GIT_AUTHOR_EMAIL": "tests@dynconf.test",
        "GIT_COMMITTER_NAME": "tests",
        "GIT_COMMITTER_EMAIL": "tests@dynconf.test",
        "GIT_INDEX_FILE": str(root / f".index-agent-{os.getpid()}-{threading.get_ident()}"),
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        env=env,
        text=True,
        check=True,
        capture_output=True,
    ).stdout.strip()


def _git_remove(server: Any, path: str) -> None:
    """Commit the removal of ``path`` on the server's branch (plumbing, like ``commit_file``)."""
    repo, ref = server.repo_path, f"refs/heads/{server.branch}"
    parent = _git(repo, server.root, "rev-parse", ref)
    _git(repo, server.root, "read-tree", parent)
    # mode 0 removes the entry; --force-remove wants a work tree, and this repo is bare
    _git(repo, server.root, "update-index", "--index-info", stdin=f"0 {'0' * 40}\t{path}\n")
    tree = _git(repo, server.root, "write-tree")
    commit = _git(repo, server.root, "commit-tree", tree, "-p", parent, "-m", f"remove {path}")
    _git(repo, server.root, "update-ref", ref, commit, parent)


@pytest.fixture
def git(git_server: Any, tmp_path: Path) -> Harness:
    needs_store("git")
    path = f"agent/{uuid.uuid4().hex}.json"
    host, port = _host_port(git_server.http_url)
    return Harness(
        "git",
        git_server.http_url,
        path,
        lambda d: git_server.commit_file(path, json.dumps(d), f"agent test {path}"),
        lambda: _git_remove(git_server, path),
        host,
        port,
        args=("--ref", f"branch:{git_server.branch}"),
        env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
    )


class _Loop:
    """A private event loop on a thread, so a synchronous test can drive nats-py."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=20)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()


@pytest.fixture
def nats(nats_server: Any) -> Iterator[Harness]:
    needs_store("nats")
    from nats.js.api import KeyValueConfig

    loop = _Loop()
    client = loop.run(nats_server.connect())
    js = client.jetstream()
    bucket = f"agent-{uuid.uuid4().hex[:12]}"
    kv = loop.run(js.create_key_value(KeyValueConfig(bucket=bucket, history=5)))
    host, port = _host_port(nats_server.url)
    try:
        yield Harness(
            "nats",
            nats_server.url,
            f"{bucket}/app.json",
            lambda d: loop.run(kv.put("app.json", json.dumps(d).encode())),
            lambda: loop.run(kv.delete("app.json")),
            host,
            port,
        )
    finally:
        loop.run(js.delete_key_value(bucket))
        loop.run(client.close())
        loop.close()


@pytest.fixture
def s3(s3_server: Any, tmp_path: Path) -> Iterator[Harness]:
    needs_store("s3")
    bucket = f"agent-{uuid.uuid4().hex[:12]}"
    client = s3_server.client
    client.create_bucket(Bucket=bucket)
    key = "config/app.json"
    host, port = _host_port(s3_server.endpoint_url)
    yield Harness(
        "s3",
        bucket,
        key,
        lambda d: client.put_object(Bucket=bucket, Key=key, Body=json.dumps(d).encode()),
        lambda: client.delete_object(Bucket=bucket, Key=key),
        host,
        port,
        args=("--api-url", s3_server.endpoint_url),
        env={
            "AWS_ACCESS_KEY_ID": s3_server.access_key_id,
            "AWS_SECRET_ACCESS_KEY": s3_server.secret_access_key,
            "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_PROFILE": None,
            "AWS_REGION": None,
            "AWS_DEFAULT_REGION": None,
            "AWS_SESSION_TOKEN": None,
        },
    )
    client.delete_object(Bucket=bucket, Key=key)
    client.delete_bucket(Bucket=bucket)


class ConfigServer:
    """A real config server (the ``[server]`` app under uvicorn) on a thread of this process.

    It serves ``app/prod`` from ``app.json`` in ``root``; deleting the document restarts the
    server on the same port without that section (it then answers 404, the agent's absent),
    and re-creating it restarts it with the section again.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.serving = False
        self.server: Any = None
        self.thread: threading.Thread | None = None

    def _settings(self, *, with_section: bool) -> Any:
        from dynconf_store_configserver.server.settings import parse_settings

        (self.root / "other.json").write_text("{}")
        sections = [{"application": "other", "profile": "prod", "files": ["other.json"]}]
        if with_section:
            sections.append(
                {
                    "application": "app",
                    "profile": "prod",
                    "files": ["app.json"],
                    "whole_document": True,
                }
            )
        return parse_settings({"server": {
            "bind": "127.0.0.1:0", "store_interval": 0.5, "file_poll_seconds": 0.05,
            "keepalive_seconds": 1.0, "sections": sections,
            "clients": [{"name": "agents", "token": CONFIG_SERVER_TOKEN,
                         "applications": [section["application"] for section in sections]}],
        }}, base=self.root)  # fmt: skip

    def start(self, *, with_section: bool = True) -> None:
        from dynconf_store_configserver.server.main import build_server

        self.server = build_server(
            self._settings(with_section=with_section), port=self.port, drain_seconds=1
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive(), "the config server exited while starting"
            assert time.monotonic() < deadline, "the config server did not start"
            time.sleep(0.02)
        self.serving = with_section

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            assert self.thread is not None
            self.thread.join(15)
            self.server = None

    def put(self, document: dict[str, Any]) -> None:
        scratch = self.root / ".app.json.tmp"
        scratch.write_text(json.dumps(document))
        scratch.replace(self.root / "app.json")
        if not self.serving:
            self.stop()
            self.start()

    def delete(self) -> None:
        self.stop()
        (self.root / "app.json").unlink(missing_ok=True)
        self.start(with_section=False)


@pytest.fixture
def configserver(tmp_path: Path) -> Iterator[Harness]:
    needs_store("config-server")
    root = tmp_path / "config-server"
    root.mkdir()
    (root / "app.json").write_text("{}")
    server = ConfigServer(root)
    server.start()
    try:
        yield Harness(
            "config-server",
            server.url,
            "app/prod",
            server.put,
            server.delete,
            "127.0.0.1",
            server.port,
            token=CONFIG_SERVER_TOKEN,
        )
    finally:
        server.stop()


HARNESSES = [
    "consul",
    "etcd",
    "redis",
    "vault_kv",
    "firestore",
    "git",
    "configserver",
    "nats",
    "s3",
]


def _start(
    agent: Start, harness: Harness, out: Path, proxy: Relay | None = None, *extra: str
) -> AgentProcess:
    endpoint, args = harness.via(proxy) if proxy is not None else (harness.endpoint, harness.args)
    env: dict[str, str | None] = {**harness.env}
    if harness.token:
        env["DYNAMIC_CONFIG_AGENT_TOKEN"] = harness.token
    return agent(
        "--source",
        harness.name,
        "--endpoint",
        endpoint,
        "--key",
        harness.key,
        "--out",
        str(out),
        "--watch",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
        *args,
        *extra,
        env=env,
    )


@pytest.fixture(params=HARNESSES)
def store(request: pytest.FixtureRequest) -> Harness:
    harness: Harness = request.getfixturevalue(request.param)
    return harness


def test_a_change_in_the_store_reaches_the_file(
    agent: Start, store: Harness, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    store.put({"db": {"host": "db-1", "port": 5432}})
    out = tmp_path / "app.yaml"
    process = _start(agent, store, out)
    wait_file(out, lambda t: "host: db-1" in t)
    # the file is renamed into place a moment before the render is counted
    wait_for(lambda: process.get("/readyz")[0] == 200, what="/readyz 200")
    began = time.monotonic()
    store.put({"db": {"host": "db-2", "port": 5432}})
    wait_file(out, lambda t: "host: db-2" in t)
    latency = time.monotonic() - began
    record_property("change_to_file_seconds", round(latency, 3))
    # as above: the rename lands a moment before the render is counted
    wait_for(
        lambda: process.scrape()["dynamic_config_agent_renders_total"] >= 2,
        what="the second render counted",
    )
    samples = process.scrape()
    assert samples["dynamic_config_agent_renders_total"] == 2
    if store.name in ("etcd", "consul", "vault", "nats", "config-server"):
        assert samples["dynamic_config_agent_generation"] > 0
    assert process.stop() == 0


def test_deleted_then_recreated(agent: Start, store: Harness, tmp_path: Path) -> None:
    store.put({"v": 1})
    out = tmp_path / "app.json"
    process = _start(agent, store, out, None, "--on-delete", "remove")
    wait_file(out, lambda t: '"v": 1' in t)
    store.delete()
    wait_file(out, lambda t: t == "")
    assert process.metric("absent") == 1
    store.put({"v": 1})
    wait_file(out, lambda t: '"v": 1' in t)
    process.wait_metric("absent", lambda v: v == 0)
    assert process.metric("absent_total") == 1


def test_store_restarted_mid_watch_is_followed_again(
    agent: Start, store: Harness, tmp_path: Path, cut_proxy: Callable[[str, int], Relay]
) -> None:
    proxy = cut_proxy(store.host, store.port)
    store.put({"v": 1})
    out = tmp_path / "app.json"
    process = _start(agent, store, out, proxy)
    wait_file(out, lambda t: '"v": 1' in t)
    proxy.cut()
    store.put({"v": 2})  # changed while the agent cannot see the store

    def noticed() -> bool:
        # a dropped stream counts a reconnect; firestore's listener retries inside its client
        # library without a word, and the failed resyncs are what the agent sees instead
        samples = process.scrape()
        return (
            samples["dynamic_config_agent_watch_reconnects_total"] >= 1
            or samples["dynamic_config_agent_render_failures_total"] >= 1
        )

    wait_for(noticed, timeout=30, what="the agent to notice the store is gone")
    proxy.restore()
    wait_file(out, lambda t: '"v": 2' in t, timeout=60)
    store.put({"v": 3})
    wait_file(out, lambda t: '"v": 3' in t, timeout=30)
    assert process.proc.poll() is None


def test_store_down_at_start_with_a_cache_then_up(
    agent: Start, consul: Harness, tmp_path: Path, cut_proxy: Callable[[str, int], Relay]
) -> None:
    proxy = cut_proxy(consul.host, consul.port)
    proxy.cut()
    consul.put({"v": "fresh"})
    out = tmp_path / "app.json"
    out.write_text('{"v": "cached"}\n')
    process = _start(agent, consul, out, proxy, "--timeout", "2")
    process.wait_event("serving_cached", timeout=30)
    assert process.get("/readyz")[0] == 503
    proxy.restore()
    wait_file(out, lambda t: '"fresh"' in t, timeout=60)
    # the file is renamed into place a moment before the agent records the render
    deadline = time.monotonic() + 5
    while process.get("/readyz")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.get("/readyz")[0] == 200


def test_store_down_at_start_without_a_cache_is_fatal(
    agent: Start, consul: Harness, tmp_path: Path, cut_proxy: Callable[[str, int], Relay]
) -> None:
    proxy = cut_proxy(consul.host, consul.port)
    proxy.cut()
    process = _start(agent, consul, tmp_path / "app.json", proxy, "--timeout", "2")
    assert process.wait_exit(timeout=30) == 1
    assert "holds nothing to serve" in process.events("agent_failed")[0]["reason"]


def test_an_idle_consul_watch_is_confirmed_by_a_resync_every_interval_and_stays_fresh(
    agent: Start, consul: Harness, tmp_path: Path
) -> None:
    """An open blocking query that answers nothing looks the same as one on a connection
    that forwards nothing: the document is confirmed by a read every --watch interval (over
    a client of its own), and staleness counts from that read."""
    consul.put({"v": 1})
    out = tmp_path / "app.json"
    process = _start(agent, consul, out, None, "--max-staleness", "2")
    wait_file(out, lambda t: '"v": 1' in t)
    process.wait_metric("watch_connected", lambda v: v == 1)
    time.sleep(3.5)  # three --watch intervals with nothing changing
    samples = process.scrape()
    assert samples["dynamic_config_agent_resyncs_total"] >= 2
    assert samples["dynamic_config_agent_watch_reconnects_total"] == 0
    assert samples["dynamic_config_agent_staleness_seconds"] <= 1
    assert process.get("/readyz") == (200, "ok\n")
    assert process.stop() == 0


def test_one_shot_against_consul_is_quick(agent: Start, consul: Harness, tmp_path: Path) -> None:
    consul.put({"a": 1})
    out = tmp_path / "app.toml"
    process = agent(
        "--source", "consul", "--endpoint", consul.endpoint, "--key", consul.key, "--out", str(out)
    )
    assert process.wait_exit() == 0
    assert out.read_text() == "a = 1\n"
