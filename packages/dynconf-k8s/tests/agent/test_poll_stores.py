"""Poll stores (vault KV, s3, git): exact staleness, and no change lost as a watch opens.

A poll store's watch asks every interval and reports each successful check
(``dynconf.stores.report_watching``), so ``staleness_seconds`` is the age of the last check,
not a guess. Its first observation primes its marker and delivers nothing, so the agent reads
the store once more after that observation: a change landing between the first fetch and the
watch opening is rendered, not silently absorbed into the marker. The node agent follows its
documents through the same follower, so the same window is tested for its volumes (vault, s3,
git) at the end, with these harnesses.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from dynconf.follow import StoreDriver
from dynconf.plugins import discover, use_registry
from dynconf_k8s.agent.flags import parse_args
from dynconf_k8s.agent.loop import WatchLoop
from dynconf_k8s.agent.main import store_type
from dynconf_k8s.agent.metrics import AgentMetrics, AgentState
from dynconf_k8s.node.attributes import VolumeSpec, parse_volume
from dynconf_k8s.node.shared import Documents
from tests.fixtures.relay import Relay

from .conftest import AgentProcess, wait_file
from .test_stores import Harness, _host_port, git, needs_store, s3, vault_kv

__all__ = ["git", "s3", "vault_kv"]  # harness fixtures the node agent's case asks for by name

Start = Callable[..., AgentProcess]


@pytest.fixture
def vault_doc(vault_server: Any) -> Iterator[Harness]:
    needs_store("vault")
    path = f"agent-poll-{uuid.uuid4().hex}"
    kv = vault_server.client.secrets.kv.v2
    host, port = _host_port(vault_server.addr)
    yield Harness(
        "vault", vault_server.addr, f"secret/{path}",
        lambda d: kv.create_or_update_secret(path=path, secret=d, mount_point="secret"),
        lambda: kv.delete_metadata_and_all_versions(path=path, mount_point="secret"),
        host, port, token=vault_server.token,
    )  # fmt: skip
    kv.delete_metadata_and_all_versions(path=path, mount_point="secret")


def test_poll_store_staleness_is_the_age_of_the_last_check(
    agent: Start, vault_doc: Harness, tmp_path: Path, cut_proxy: Callable[[str, int], Relay]
) -> None:
    interval = 2
    proxy = cut_proxy(vault_doc.host, vault_doc.port)
    vault_doc.put({"v": 1})
    out = tmp_path / "app.json"
    endpoint, _ = vault_doc.via(proxy)
    process = agent("--source", "vault", "--endpoint", endpoint, "--key", vault_doc.key,
                    "--out", str(out), "--watch", str(interval), "--timeout", "1",
                    "--metrics-addr", "127.0.0.1:0",
                    env={"DYNAMIC_CONFIG_AGENT_TOKEN": vault_doc.token})  # fmt: skip
    wait_file(out, lambda t: '"v": 1' in t)
    # sampled over three intervals: each check resets it, so it never passes the interval
    # (the gauge is whole seconds; one second of slack covers the check's own latency)
    seen = []
    end = time.monotonic() + 3 * interval
    while time.monotonic() < end:
        seen.append(process.metric("staleness_seconds"))
        time.sleep(0.25)
    assert max(seen) <= interval + 1, seen
    # with the store unreachable no check succeeds, and the gauge says so
    proxy.cut()
    process.wait_metric("staleness_seconds", lambda v: v >= interval + 2, timeout=30)
    proxy.restore()
    process.wait_metric("staleness_seconds", lambda v: v <= interval + 1, timeout=30)


class ChangedBeforeTheWatch:
    """A real source whose watch opens only after ``change()`` has landed in the store.

    That is the window under test: after the first fetch, before the watch's first poll.
    Everything else (hooks included) reaches the real source.
    """

    def __init__(self, inner: Any, change: Callable[[], None]) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_change", [change])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Any]:
        while self._change:
            self._change.pop()()
        yield from self._inner.changes(interval, stop)


def test_a_change_between_the_first_fetch_and_the_watch_is_rendered(
    vault_doc: Harness, tmp_path: Path
) -> None:
    vault_doc.put({"v": 1})
    out = tmp_path / "app.json"
    env = {"DYNAMIC_CONFIG_AGENT_TOKEN": vault_doc.token}
    settings = parse_args(["--source", "vault", "--endpoint", vault_doc.endpoint,
                           "--key", vault_doc.key, "--out", str(out), "--watch", "1"], env)  # fmt: skip
    registry = discover()
    use_registry(registry)
    store = store_type(registry, "vault", None)
    metrics = AgentMetrics(AgentState())

    def build() -> StoreDriver:
        source = store.build(settings.spec)
        return StoreDriver(ChangedBeforeTheWatch(source, lambda: vault_doc.put({"v": 2})))

    async def scenario() -> None:
        loop = WatchLoop(settings, metrics, build)
        try:
            assert await loop.first_fetch()
            assert json.loads(out.read_text()) == {"v": 1}
            async with anyio.create_task_group() as tg:
                tg.start_soon(loop.run)
                with anyio.fail_after(20):
                    while '"v": 2' not in out.read_text():
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
        finally:
            await loop.driver.close()
            use_registry(None)

    anyio.run(scenario)
    assert metrics.state.renders_total == 2
    assert metrics.state.watch_reconnects_total == 0


# ---------------------------------------------------------------------------- node agent
_ATTRIBUTE_FOR = {"--ref": "ref", "--api-url": "api-url"}


def volume_of(harness: Harness, target: Path) -> VolumeSpec:
    attributes = {
        "source": harness.name,
        "endpoint": harness.endpoint,
        "key": harness.key,
        "path": "conf/c.json",
        "watch-seconds": "1",
    }
    args = list(harness.args)
    for flag, value in zip(args[::2], args[1::2], strict=True):
        attributes[_ATTRIBUTE_FOR[flag]] = value
    secrets = {"token": harness.token} if harness.token else {}
    return parse_volume(target, attributes, secrets)


@pytest.mark.parametrize("harness_name", ["vault_kv", "s3", "git"])
def test_a_change_between_the_first_fetch_and_the_prime_reaches_the_volume(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    harness_name: str,
) -> None:
    harness: Harness = request.getfixturevalue(harness_name)
    for name, value in harness.env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    harness.put({"v": 1})
    target = tmp_path / "mount"
    target.mkdir()
    volume = volume_of(harness, target)
    registry = discover()
    use_registry(registry)
    store = store_type(registry, harness.name, None)

    def build(spec: VolumeSpec) -> StoreDriver:
        return StoreDriver(
            ChangedBeforeTheWatch(store.build(spec.store), lambda: harness.put({"v": 2}))
        )

    out = target / "conf" / "c.json"

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            documents = Documents(build, tg)
            assert await documents.claim(volume)
            assert json.loads(out.read_text()) == {"v": 1}
            with anyio.fail_after(30):
                while json.loads(out.read_text()) != {"v": 2}:
                    await anyio.sleep(0.05)
            await documents.close()
            tg.cancel_scope.cancel()

    try:
        anyio.run(scenario)
    finally:
        use_registry(None)


def test_node_agent_lends_git_its_state_dir_when_home_is_unwritable(
    git: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The node agent's root and home are read-only: git clones under ``<state-dir>/stores``."""
    from dynconf_k8s.node.service import NodeAgent, NodeSettings

    for name, value in git.env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    unwritable = tmp_path / "home"
    unwritable.mkdir(mode=0o500)
    monkeypatch.setenv("HOME", str(unwritable))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    git.put({"v": 1})
    target = tmp_path / "mount"
    target.mkdir()
    state = tmp_path / "state"
    registry = discover()
    use_registry(registry)
    settings = NodeSettings(node_id="n", socket=tmp_path / "csi.sock", state_dir=state)

    async def scenario() -> None:
        async with anyio.create_task_group() as tg:
            agent = NodeAgent(settings, registry, lambda build: Documents(build, tg))
            assert await agent.documents.claim(volume_of(git, target))
            assert json.loads((target / "conf" / "c.json").read_text()) == {"v": 1}
            await agent.documents.close()
            tg.cancel_scope.cancel()

    try:
        anyio.run(scenario)
    finally:
        use_registry(None)
    assert any((state / "stores" / "git").iterdir())
    assert not any(unwritable.iterdir())
