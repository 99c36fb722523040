"""The agent against the real stores from ``scripts/testenv``: render, follow, survive faults.

Each store gets the same three checks — a change reaches the file, a deletion moves ``absent``
and a re-creation renders again, and a store that goes away mid-watch (a loopback proxy cut in
front of the real server, so the session's shared server is not disturbed) is followed again
once it is back. Stores whose plugin is not installed yet are skipped by name.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from dynconf.plugins import discover

from .conftest import AgentProcess, CutProxy, wait_file

Start = Callable[..., AgentProcess]
STORES = set(discover().stores)


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

    def endpoint_via(self, proxy: CutProxy) -> str:
        return self.endpoint.replace(f"{self.host}:{self.port}", f"127.0.0.1:{proxy.port}")


@pytest.fixture
def consul(consul_server: Any) -> Iterator[Harness]:
    needs_store("consul")
    key = f"agent/{uuid.uuid4().hex}.json"
    kv = consul_server.client.kv
    yield Harness("consul", consul_server.url, key, lambda d: kv.put(key, json.dumps(d)),
                  lambda: kv.delete(key), consul_server.host, consul_server.port)
    kv.delete(key)


@pytest.fixture
def etcd(etcd_server: Any) -> Iterator[Harness]:
    needs_store("etcd")
    key = f"agent/{uuid.uuid4().hex}.json"
    client = etcd_server.client
    yield Harness("etcd", etcd_server.url, key, lambda d: client.put(key, json.dumps(d)),
                  lambda: client.delete(key), etcd_server.host, etcd_server.port)
    client.delete(key)


@pytest.fixture
def redis(redis_server: Any) -> Iterator[Harness]:
    needs_store("redis")
    key = f"agent/{uuid.uuid4().hex}.json"
    client = redis_server.client
    yield Harness("redis", redis_server.url, key, lambda d: client.set(key, json.dumps(d)),
                  lambda: client.delete(key), redis_server.host, redis_server.port)
    client.delete(key)


@pytest.fixture
def vault_kv(vault_server: Any) -> Iterator[Harness]:
    needs_store("vault")
    path = f"agent-{uuid.uuid4().hex}"
    kv = vault_server.client.secrets.kv.v2
    parts = urlsplit(vault_server.addr)
    yield Harness(
        "vault", vault_server.addr, f"secret/{path}",
        lambda d: kv.create_or_update_secret(path=path, secret=d, mount_point="secret"),
        lambda: kv.delete_metadata_and_all_versions(path=path, mount_point="secret"),
        parts.hostname or "127.0.0.1", parts.port or 8200,
    )
    kv.delete_metadata_and_all_versions(path=path, mount_point="secret")


@pytest.fixture
def firestore(firestore_server: Any) -> Iterator[Harness]:
    needs_store("firestore")
    doc_id = uuid.uuid4().hex
    ref = firestore_server.client.collection("agent").document(doc_id)
    host, _, port = firestore_server.emulator_host.rpartition(":")
    yield Harness("firestore", firestore_server.project, f"agent/{doc_id}", ref.set,
                  ref.delete, host, int(port),
                  args=("--auth", "emulator", "--api-url", firestore_server.emulator_host))
    ref.delete()


HARNESSES = ["consul", "etcd", "redis", "vault_kv", "firestore"]


def _start(agent: Start, harness: Harness, out: Path, endpoint: str | None = None,
           *extra: str, env: dict[str, str] | None = None) -> AgentProcess:
    env = {"DYNAMIC_CONFIG_AGENT_TOKEN": _token(harness), **(env or {})}
    env = {k: v for k, v in env.items() if v}
    return agent("--source", harness.name, "--endpoint", endpoint or harness.endpoint,
                 "--key", harness.key, "--out", str(out), "--watch", "1",
                 "--metrics-addr", "127.0.0.1:0", *harness.args, *extra, env=env)


def _token(harness: Harness) -> str:
    return VAULT_TOKEN[0] if harness.name == "vault" else ""


VAULT_TOKEN: list[str] = [""]


@pytest.fixture(params=HARNESSES)
def store(request: pytest.FixtureRequest) -> Harness:
    harness: Harness = request.getfixturevalue(request.param)
    if harness.name == "vault":
        VAULT_TOKEN[0] = request.getfixturevalue("vault_server").token
    return harness


def test_a_change_in_the_store_reaches_the_file(agent: Start, store: Harness, tmp_path: Path) -> None:
    store.put({"db": {"host": "db-1", "port": 5432}})
    out = tmp_path / "app.yaml"
    process = _start(agent, store, out)
    wait_file(out, lambda t: "host: db-1" in t)
    assert process.get("/readyz")[0] == 200
    store.put({"db": {"host": "db-2", "port": 5432}})
    wait_file(out, lambda t: "host: db-2" in t)
    samples = process.scrape()
    assert samples["dynamic_config_agent_renders_total"] == 2
    if store.name in ("etcd", "consul", "vault"):
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
    agent: Start, store: Harness, tmp_path: Path, cut_proxy: Callable[[str, int], CutProxy]
) -> None:
    if store.name == "firestore":
        pytest.skip("the emulator address rides --api-url; covered by the firestore package")
    proxy = cut_proxy(store.host, store.port)
    store.put({"v": 1})
    out = tmp_path / "app.json"
    process = _start(agent, store, out, store.endpoint_via(proxy))
    wait_file(out, lambda t: '"v": 1' in t)
    proxy.cut()
    store.put({"v": 2})  # changed while the agent cannot see the store
    process.wait_metric("watch_reconnects_total", lambda v: v >= 1, timeout=30)
    proxy.restore()
    wait_file(out, lambda t: '"v": 2' in t, timeout=60)
    store.put({"v": 3})
    wait_file(out, lambda t: '"v": 3' in t, timeout=30)
    assert process.proc.poll() is None


def test_store_down_at_start_with_a_cache_then_up(
    agent: Start, consul: Harness, tmp_path: Path, cut_proxy: Callable[[str, int], CutProxy]
) -> None:
    proxy = cut_proxy(consul.host, consul.port)
    proxy.cut()
    consul.put({"v": "fresh"})
    out = tmp_path / "app.json"
    out.write_text('{"v": "cached"}\n')
    process = _start(agent, consul, out, consul.endpoint_via(proxy), "--timeout", "2")
    process.wait_event("serving_cached", timeout=30)
    assert process.get("/readyz")[0] == 503
    proxy.restore()
    wait_file(out, lambda t: '"fresh"' in t, timeout=60)
    assert process.get("/readyz")[0] == 200


def test_store_down_at_start_without_a_cache_is_fatal(
    agent: Start, consul: Harness, tmp_path: Path, cut_proxy: Callable[[str, int], CutProxy]
) -> None:
    proxy = cut_proxy(consul.host, consul.port)
    proxy.cut()
    process = _start(agent, consul, tmp_path / "app.json", consul.endpoint_via(proxy),
                     "--timeout", "2")
    assert process.wait_exit(timeout=30) == 1
    assert "holds nothing to serve" in process.events("agent_failed")[0]["reason"]


def test_one_shot_against_consul_is_quick(agent: Start, consul: Harness, tmp_path: Path) -> None:
    consul.put({"a": 1})
    out = tmp_path / "app.toml"
    process = agent("--source", "consul", "--endpoint", consul.endpoint, "--key", consul.key,
                    "--out", str(out))
    assert process.wait_exit() == 0
    assert out.read_text() == "a = 1\n"
