"""The node agent end to end: a real process, its CSI socket, real stores, files on disk.

Sharing is counted at the store: a Redis keyspace watch is one subscription to
``__keyspace@0__:<key>``, so ``PUBSUB NUMSUB`` is the number of watches open for a document.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from dynconf_k8s.node._generated import csi_pb2 as csi
from dynconf_k8s.node.attributes import VolumeRefused, parse_volume
from dynconf_k8s.node.service import DRIVER_NAME, NodeAgent, NodeSettings

from .conftest import Node, NodeProcess, read, wait_for

REPO = Path(__file__).resolve().parents[4]


# ---------------------------------------------------------------------------- helpers
def watches(redis_client: Any, key: str) -> int:
    counts = redis_client.pubsub_numsub(f"__keyspace@0__:{key}")
    return int(counts[0][1])


@pytest.fixture
def redis_key(redis_server: Any) -> Iterator[str]:
    key = f"node-agent/{uuid.uuid4().hex[:8]}/config.json"
    redis_server.client.set(key, json.dumps({"db": {"host": "db.internal", "port": 9000}}))
    yield key
    redis_server.client.delete(key)


def redis_volume(
    redis_server: Any, key: str, path: str = "rendered.toml", **more: str
) -> dict[str, str]:
    return {"source": "redis", "endpoint": redis_server.url, "key": key, "path": path, **more}


def document_file(node: Node, body: dict[str, Any]) -> Path:
    path = node.root / "store" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(body))
    return path


def code_of(error: pytest.ExceptionInfo[grpc.RpcError]) -> grpc.StatusCode:
    return error.value.code()  # type: ignore[attr-defined,no-any-return]


def details_of(error: pytest.ExceptionInfo[grpc.RpcError]) -> str:
    return error.value.details()  # type: ignore[attr-defined,no-any-return]


# ---------------------------------------------------------------------------- identity
def test_identity_names_the_driver_and_offers_no_controller(node: Node) -> None:
    agent = node.start()
    assert agent.client is not None
    info = agent.client.call("GetPluginInfo", csi.GetPluginInfoRequest())
    assert info.name == DRIVER_NAME
    assert info.vendor_version
    assert not info.manifest
    caps = agent.client.call("GetPluginCapabilities", csi.GetPluginCapabilitiesRequest())
    assert list(caps.capabilities) == []
    probe = agent.client.call("Probe", csi.ProbeRequest())
    assert not probe.HasField("ready")  # unset means ready
    node_info = agent.client.call("NodeGetInfo", csi.NodeGetInfoRequest())
    assert (node_info.node_id, node_info.max_volumes_per_node) == ("node-a", 0)
    assert not node_info.HasField("accessible_topology")
    node_caps = agent.client.call("NodeGetCapabilities", csi.NodeGetCapabilitiesRequest())
    assert list(node_caps.capabilities) == []


@pytest.mark.parametrize(
    "method",
    [
        "/csi.v1.Node/NodeStageVolume",
        "/csi.v1.Node/NodeUnstageVolume",
        "/csi.v1.Node/NodeGetVolumeStats",
        "/csi.v1.Node/NodeExpandVolume",
        "/csi.v1.Controller/CreateVolume",
    ],
)
def test_the_rest_of_csi_is_unimplemented(node: Node, method: str) -> None:
    agent = node.start()
    assert agent.client is not None
    with pytest.raises(grpc.RpcError) as error:
        agent.client.raw(method)
    assert code_of(error) == grpc.StatusCode.UNIMPLEMENTED


def test_healthz_and_gauges_on_the_metrics_port(node: Node) -> None:
    agent = node.start()
    assert agent.get("/healthz") == (200, "ok\n")
    assert agent.get("/readyz") == (200, "ok\n")
    assert agent.gauges() == {
        "dynamic_config_node_agent_documents": 0.0,
        "dynamic_config_node_agent_readers": 0.0,
    }
    assert agent.staleness() == 0.0  # nothing watched: nothing aging


def test_staleness_ages_while_a_document_cannot_be_read_and_restarts_on_the_next_read(
    node: Node,
) -> None:
    store = document_file(node, {"app": {"x": 1}})
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    attributes = {"source": "file", "key": str(store), "path": "app.json", "watch-seconds": "1"}
    agent.client.publish(target, attributes)
    assert agent.staleness() <= 1
    # a file store whose document is a directory answers every read with an error
    store.unlink()
    store.mkdir()
    wait_for(lambda: agent.staleness() >= 3, what="staleness past three intervals", timeout=20)
    assert '"x": 1' in (read(target / "app.json") or "")  # the last good file stays
    store.rmdir()
    store.write_text(json.dumps({"app": {"x": 2}}))
    wait_for(lambda: '"x": 2' in (read(target / "app.json") or ""), what="converged")
    wait_for(lambda: agent.staleness() <= 1, what="staleness restarted")


# ---------------------------------------------------------------------------- publish
def test_publish_writes_each_readers_own_file_before_returning(node: Node) -> None:
    store = document_file(node, {"db": {"host": "db.internal", "port": 9000}, "app": {"x": 1}})
    agent = node.start()
    client = agent.client
    assert client is not None
    whole, section = node.target(), node.target()
    client.publish(whole, {"source": "file", "key": str(store), "path": "rendered.toml"})
    client.publish(
        section,
        {
            "source": "file",
            "key": str(store),
            "path": "conf/db.properties",
            "section": "db",
            "file-mode": "0640",
        },
    )
    # no waiting: publish returned, so the files are there
    assert 'host = "db.internal"' in (read(whole / "rendered.toml") or "")
    assert "port=9000" in (read(section / "conf" / "db.properties") or "").replace(" ", "")
    assert stat.S_IMODE((section / "conf" / "db.properties").stat().st_mode) == 0o640
    assert agent.gauges() == {
        "dynamic_config_node_agent_documents": 1.0,
        "dynamic_config_node_agent_readers": 2.0,
    }

    store.write_text(json.dumps({"db": {"host": "db.internal", "port": 9100}, "app": {"x": 1}}))
    wait_for(lambda: "9100" in (read(whole / "rendered.toml") or ""), what="whole file updated")
    wait_for(
        lambda: "9100" in (read(section / "conf" / "db.properties") or ""),
        what="section file updated",
    )


def test_publish_is_idempotent(node: Node) -> None:
    store = document_file(node, {"port": 9000})
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    volume = {"source": "file", "key": str(store), "path": "c.json"}
    agent.client.publish(target, volume)
    agent.client.publish(target, volume)
    assert agent.gauges()["dynamic_config_node_agent_readers"] == 1.0
    with pytest.raises(grpc.RpcError) as error:
        agent.client.publish(target, {**volume, "path": "other.json"})
    assert code_of(error) == grpc.StatusCode.ALREADY_EXISTS


def test_two_volumes_of_one_redis_key_share_one_fetch_and_one_watch(
    node: Node, redis_server: Any, redis_key: str
) -> None:
    agent = node.start()
    client = agent.client
    assert client is not None
    first, second = node.target(), node.target()
    client.publish(first, redis_volume(redis_server, redis_key, "rendered.toml"))
    client.publish(second, redis_volume(redis_server, redis_key, "app.yaml", section="db"))
    assert "9000" in (read(first / "rendered.toml") or "")
    assert "port: 9000" in (read(second / "app.yaml") or "")
    wait_for(lambda: watches(redis_server.client, redis_key) == 1, what="one watch open")
    published = agent.events("volume_published")
    assert [line["documents"] for line in published] == [1, 1]
    assert len(agent.events("document_watched")) == 1  # one client, one first fetch

    redis_server.client.set(redis_key, json.dumps({"db": {"host": "db.internal", "port": 9100}}))
    wait_for(lambda: "9100" in (read(first / "rendered.toml") or ""), what="first file")
    wait_for(lambda: "port: 9100" in (read(second / "app.yaml") or ""), what="second file")
    assert watches(redis_server.client, redis_key) == 1
    assert agent.gauges() == {
        "dynamic_config_node_agent_documents": 1.0,
        "dynamic_config_node_agent_readers": 2.0,
    }


@pytest.fixture
def two_redis_users(redis_server: Any) -> Iterator[tuple[str, str]]:
    names = [f"dcna-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for name in names:
        redis_server.client.acl_setuser(
            name,
            enabled=True,
            passwords=[f"+pw-{name}"],
            keys=["*"],
            channels=["*"],
            commands=["+@all"],
        )
    urls = tuple(
        redis_server.url.replace("redis://", f"redis://{name}:pw-{name}@", 1) for name in names
    )
    yield urls[0], urls[1]
    for name in names:
        redis_server.client.acl_deluser(name)


def test_a_different_credential_is_a_different_read(
    node: Node, redis_server: Any, redis_key: str, two_redis_users: tuple[str, str]
) -> None:
    agent = node.start()
    client = agent.client
    assert client is not None
    volume = {"source": "redis", "key": redis_key, "path": "c.json"}
    one, other, again = node.target(), node.target(), node.target()
    client.publish(one, volume, secrets={"endpoint": two_redis_users[0]})
    client.publish(other, volume, secrets={"endpoint": two_redis_users[1]})
    client.publish(again, volume, secrets={"endpoint": two_redis_users[0]})
    wait_for(lambda: watches(redis_server.client, redis_key) == 2, what="two watches")
    assert agent.gauges() == {
        "dynamic_config_node_agent_documents": 2.0,
        "dynamic_config_node_agent_readers": 3.0,
    }


def test_endpoint_in_both_attribute_and_secret_is_refused(node: Node) -> None:
    agent = node.start()
    assert agent.client is not None
    with pytest.raises(grpc.RpcError) as error:
        agent.client.publish(
            node.target(),
            {"source": "redis", "endpoint": "redis://h:6379", "key": "k.json", "path": "c.json"},
            secrets={"endpoint": "redis://u:p@h:6379"},
        )
    assert code_of(error) == grpc.StatusCode.INVALID_ARGUMENT
    assert "one address, one place" in details_of(error)


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "path", ["../escape.json", "/etc/escape.json", "a/../../escape.json", ".."]
)
def test_path_outside_the_volume_is_refused(node: Node, path: str) -> None:
    store = document_file(node, {"port": 9000})
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    with pytest.raises(grpc.RpcError) as error:
        agent.client.publish(target, {"source": "file", "key": str(store), "path": path})
    assert code_of(error) == grpc.StatusCode.INVALID_ARGUMENT
    assert details_of(error) == (
        'the volume attribute "path" must be a relative file name inside the volume '
        '(no leading "/", no "..", no NUL): the kubelet owns the directory'
    )
    assert not target.exists()
    assert not (target.parent / "escape.json").exists()
    assert not (target.parent.parent / "escape.json").exists()


def test_a_huge_attribute_is_refused_by_name_without_echoing_it(node: Node) -> None:
    from dynconf_k8s.node.attributes import OPTIONAL, REQUIRED

    agent = node.start()
    assert agent.client is not None
    volume = {"source": "redis", "endpoint": "redis://127.0.0.1:1", "key": "k.json"}
    huge = "v" * 100_000
    for name in (*REQUIRED, *OPTIONAL, huge):
        with pytest.raises(grpc.RpcError) as error:
            agent.client.publish(node.target(), {**volume, "path": "c.json", name: huge})
        # not RESOURCE_EXHAUSTED: the status fits, names the attribute, quotes nothing
        assert code_of(error) == grpc.StatusCode.INVALID_ARGUMENT, name[:20]
        details = details_of(error)
        assert "v" * 64 not in details
        assert len(details) < 300
        assert (f'"{name}"' if name is not huge else "attribute name") in details
    assert agent.proc.poll() is None


def test_a_refusal_quoting_a_long_value_is_bounded_to_one_status_line(node: Node) -> None:
    agent = node.start()
    assert agent.client is not None
    volume = {"source": "redis", "endpoint": "redis://127.0.0.1:1", "key": "k.json"}
    # under the length limit, so the agent's parser sees it and may quote it
    for name in ("file-mode", "auth", "ref", "endpoint"):
        with pytest.raises(grpc.RpcError) as error:
            agent.client.publish(node.target(), {**volume, "path": "c.json", name: "9\n" * 2000})
        assert code_of(error) == grpc.StatusCode.INVALID_ARGUMENT, name
        assert len(details_of(error)) <= 1024
        assert "\n" not in details_of(error)


@pytest.mark.parametrize("path", ["L" * 2000, "c", "dir/app.conf", "x" * 4000 + ".txt"])
def test_a_path_no_format_writes_is_refused_briefly_without_echoing_it(path: str) -> None:
    volume = {"source": "redis", "endpoint": "redis://127.0.0.1:1", "key": "k.json"}
    with pytest.raises(VolumeRefused) as error:
        parse_volume("/var/lib/kubelet/pods/p/volumes/v/mount", {**volume, "path": path}, {})
    message = str(error.value)
    assert message.startswith('the volume attribute "path" has no extension a format writes')
    assert path not in message and "template" not in message and len(message) < 300


def test_every_volume_refusal_is_one_line_of_at_most_one_kib() -> None:
    message = str(VolumeRefused("a store said: " + "v\n" * 3000))
    assert len(message) == 1024 and message.endswith("…") and "\n" not in message


@pytest.mark.parametrize("missing", ["source", "key", "path"])
def test_a_missing_required_attribute_is_named(node: Node, missing: str) -> None:
    agent = node.start()
    assert agent.client is not None
    volume = {"source": "file", "key": "/nowhere/c.json", "path": "c.json"}
    del volume[missing]
    with pytest.raises(grpc.RpcError) as error:
        agent.client.publish(node.target(), volume)
    assert code_of(error) == grpc.StatusCode.INVALID_ARGUMENT
    assert details_of(error) == f'the volume attribute "{missing}" is required'


@pytest.mark.parametrize(
    ("attributes", "says"),
    [
        ({"mode": "sidecar"}, 'the volume attribute "mode" is not taken here'),
        ({"metrics-port": "9110"}, "one endpoint for the node"),
        ({"colour": "blue"}, 'the volume attribute "colour" is unknown'),
        ({"ref": "main"}, 'the volume attribute "ref" is git\'s; remove it for a redis source'),
        ({"file-mode": "1777"}, 'the volume attribute "file-mode" is past 0777'),
        ({"watch-seconds": "soon"}, 'the volume attribute "watch-seconds" takes whole seconds'),
        (
            {"source": "nosuch"},
            "the nosuch store is not in this installation; it carries: config-server, consul",
        ),
    ],
)
def test_attributes_the_agent_refuses_are_refused(
    node: Node, attributes: dict[str, str], says: str
) -> None:
    agent = node.start()
    assert agent.client is not None
    volume = {
        "source": "redis",
        "endpoint": "redis://127.0.0.1:1",
        "key": "k.json",
        "path": "c.json",
    }
    with pytest.raises(grpc.RpcError) as error:
        agent.client.publish(node.target(), {**volume, **attributes})
    assert code_of(error) == grpc.StatusCode.INVALID_ARGUMENT
    assert says in details_of(error)


def test_the_file_source_needs_the_flag() -> None:
    from dynconf.plugins import discover

    agent = NodeAgent(
        NodeSettings(node_id="n", socket=Path("/x.sock"), state_dir=Path("/nonexistent")),
        discover(),
        lambda build: None,  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(VolumeRefused, match="runs as root"):
        agent.check("/t", {"source": "file", "key": "/etc/shadow.json", "path": "c.json"}, {})


def test_a_failed_first_fetch_is_unavailable_and_leaves_nothing(node: Node) -> None:
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    with pytest.raises(grpc.RpcError) as error:
        agent.client.publish(
            target,
            {
                "source": "redis",
                "endpoint": "redis://127.0.0.1:1",
                "key": "k.json",
                "path": "c.json",
            },
        )
    assert code_of(error) == grpc.StatusCode.UNAVAILABLE
    assert details_of(error).startswith("the first fetch: ")
    assert not target.exists()
    assert list(node.state_dir.glob("*.json")) == []
    assert agent.gauges() == {
        "dynamic_config_node_agent_documents": 0.0,
        "dynamic_config_node_agent_readers": 0.0,
    }


def test_publish_without_target_or_capability_is_invalid(node: Node) -> None:
    agent = node.start()
    assert agent.client is not None
    for request, says in [
        (csi.NodePublishVolumeRequest(volume_id="v"), "target_path is required"),
        (csi.NodePublishVolumeRequest(target_path="/t"), "volume_id is required"),
        (csi.NodePublishVolumeRequest(volume_id="v", target_path="/t"), "volume_capability"),
    ]:
        with pytest.raises(grpc.RpcError) as error:
            agent.client.call("NodePublishVolume", request)
        assert code_of(error) == grpc.StatusCode.INVALID_ARGUMENT
        assert says in details_of(error)


# ---------------------------------------------------------------------------- unpublish
def test_unpublish_removes_the_reader_and_the_last_one_stops_the_watch(
    node: Node, redis_server: Any, redis_key: str
) -> None:
    agent = node.start()
    client = agent.client
    assert client is not None
    first, second = node.target(), node.target()
    client.publish(first, redis_volume(redis_server, redis_key, "nested/dir/c.toml"))
    client.publish(second, redis_volume(redis_server, redis_key, "c.json"))
    wait_for(lambda: watches(redis_server.client, redis_key) == 1, what="one watch")

    client.unpublish(first)
    assert not first.exists()  # the file, the directories path made, the target
    assert first.parent.is_dir()  # the kubelet's directory stays
    assert agent.gauges()["dynamic_config_node_agent_readers"] == 1.0
    assert watches(redis_server.client, redis_key) == 1

    redis_server.client.set(redis_key, json.dumps({"db": {"port": 9200}}))
    wait_for(lambda: "9200" in (read(second / "c.json") or ""), what="the other reader updates")
    assert not first.exists()

    client.unpublish(second)
    wait_for(lambda: watches(redis_server.client, redis_key) == 0, what="the watch stopped")
    assert agent.gauges() == {
        "dynamic_config_node_agent_documents": 0.0,
        "dynamic_config_node_agent_readers": 0.0,
    }
    assert list(node.state_dir.glob("*.json")) == []
    client.unpublish(node.target())  # an unknown target is success


def test_unpublish_leaves_files_it_did_not_write(node: Node) -> None:
    store = document_file(node, {"port": 9000})
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    agent.client.publish(target, {"source": "file", "key": str(store), "path": "c.json"})
    (target / "someone-elses").write_text("keep")
    agent.client.unpublish(target)
    assert not (target / "c.json").exists()
    assert (target / "someone-elses").read_text() == "keep"


# ---------------------------------------------------------------------------- restart
def test_after_a_restart_published_volumes_resume_watching(
    node: Node, redis_server: Any, redis_key: str
) -> None:
    agent = node.start()
    assert agent.client is not None
    first, second = node.target(), node.target()
    agent.client.publish(first, redis_volume(redis_server, redis_key, "c.toml"))
    agent.client.publish(second, redis_volume(redis_server, redis_key, "c.yaml", section="db"))
    assert agent.stop() == 0
    wait_for(lambda: watches(redis_server.client, redis_key) == 0, what="the old watch closed")
    assert "9000" in (read(first / "c.toml") or "")  # the files outlive the process

    gone = node.target()  # a volume the kubelet tore down while the agent was away
    again = node.start()
    assert again.wait_event("volumes_restored")["volumes"] == 2
    assert again.gauges() == {
        "dynamic_config_node_agent_documents": 1.0,
        "dynamic_config_node_agent_readers": 2.0,
    }
    del gone
    wait_for(lambda: watches(redis_server.client, redis_key) == 1, what="one watch again")
    redis_server.client.set(redis_key, json.dumps({"db": {"host": "db.internal", "port": 9300}}))
    wait_for(lambda: "9300" in (read(first / "c.toml") or ""), what="first file after restart")
    wait_for(lambda: "port: 9300" in (read(second / "c.yaml") or ""), what="second file")

    assert again.client is not None
    again.client.unpublish(first)
    again.client.unpublish(second)
    wait_for(lambda: watches(redis_server.client, redis_key) == 0, what="watch stopped")


def test_a_record_whose_target_is_gone_is_dropped(node: Node) -> None:
    store = document_file(node, {"port": 9000})
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    agent.client.publish(target, {"source": "file", "key": str(store), "path": "c.json"})
    agent.stop()
    (target / "c.json").unlink()
    target.rmdir()
    again = node.start()
    assert again.wait_event("volumes_restored")["volumes"] == 0
    assert list(node.state_dir.glob("*.json")) == []


def test_records_are_private(node: Node) -> None:
    store = document_file(node, {"port": 9000})
    agent = node.start()
    assert agent.client is not None
    agent.client.publish(
        node.target(),
        {"source": "file", "key": str(store), "path": "c.json"},
        secrets={"token": "s3cret"},
    )
    assert stat.S_IMODE(node.state_dir.stat().st_mode) == 0o700
    (record,) = node.state_dir.glob("*.json")
    assert stat.S_IMODE(record.stat().st_mode) == 0o600


# ---------------------------------------------------------------------------- generated code
def test_the_committed_message_modules_are_what_the_protos_generate() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen-csi-proto"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_node_process_needs_a_node_name(tmp_path: Path) -> None:
    process = NodeProcess(tmp_path / "s.sock", tmp_path / "v", env={"KUBE_NODE_NAME": ""})
    assert process.proc.wait(timeout=20) == 1
    assert process.proc.stderr is not None
    assert "KUBE_NODE_NAME is required" in process.proc.stderr.read()


# ---------------------------------------------------------------------------- symlink swaps
def outside_dir(node: Node) -> tuple[Path, dict[str, str]]:
    """A directory outside every volume, holding files under the names a volume writes."""
    outside = node.root / "outside"
    outside.mkdir()
    for name in ("app.json", "precious"):
        (outside / name).write_text(f"not yours: {name}")
    return outside, {p.name: p.read_text() for p in outside.iterdir()}


def swap_subdir(target: Path, outside: Path) -> None:
    (target / "conf").rename(target / "conf.moved")
    (target / "conf").symlink_to(outside)


def swap_file(target: Path, outside: Path) -> None:
    (target / "conf" / "app.json").unlink()
    (target / "conf" / "app.json").symlink_to(outside / "app.json")


@pytest.mark.parametrize("swap", [swap_subdir, swap_file], ids=["subdir", "file"])
def test_a_symlink_swap_before_a_rerender_writes_nothing_outside_the_volume(
    node: Node, swap: Any
) -> None:
    store = document_file(node, {"port": 9000})
    outside, before = outside_dir(node)
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    agent.client.publish(target, {"source": "file", "key": str(store), "path": "conf/app.json"})
    swap(target, outside)
    store.write_text(json.dumps({"port": 9100}))
    if swap is swap_subdir:
        failed = agent.wait_event("render_failed")
        assert "is a symlink or not a directory" in failed["reason"]
        assert "\n" not in failed["reason"]
        assert "9000" in (read(target / "conf.moved" / "app.json") or "")  # last good kept
    else:
        wait_for(lambda: "9100" in (read(target / "conf" / "app.json") or ""), what="rerender")
        assert not (target / "conf" / "app.json").is_symlink()
    assert {p.name: p.read_text() for p in outside.iterdir()} == before
    agent.client.unpublish(target)
    assert {p.name: p.read_text() for p in outside.iterdir()} == before
    assert agent.proc.poll() is None


@pytest.mark.parametrize("swap", [swap_subdir, swap_file], ids=["subdir", "file"])
def test_a_symlink_swap_before_unpublish_deletes_nothing_outside_the_volume(
    node: Node, swap: Any
) -> None:
    store = document_file(node, {"port": 9000})
    outside, before = outside_dir(node)
    agent = node.start()
    assert agent.client is not None
    target = node.target()
    agent.client.publish(target, {"source": "file", "key": str(store), "path": "conf/app.json"})
    store.write_text(json.dumps({"port": 9100}))
    wait_for(lambda: "9100" in (read(target / "conf" / "app.json") or ""), what="rerender")
    swap(target, outside)
    agent.client.unpublish(target)
    assert {p.name: p.read_text() for p in outside.iterdir()} == before
    assert (outside / "app.json").is_file()


# ---------------------------------------------------------------------------- hostile documents
def two_documents(node: Node) -> tuple[Path, Path]:
    (node.root / "store").mkdir(exist_ok=True)
    hostile, calm = node.root / "store" / "hostile.json", node.root / "store" / "calm.json"
    hostile.write_text(json.dumps({"port": 9000}))
    calm.write_text(json.dumps({"port": 7000}))
    return hostile, calm


def publish_both(agent: NodeProcess, node: Node, hostile: Path, calm: Path) -> tuple[Path, Path]:
    assert agent.client is not None
    one, other = node.target(), node.target()
    agent.client.publish(one, {"source": "file", "key": str(hostile), "path": "c.toml"})
    agent.client.publish(other, {"source": "file", "key": str(calm), "path": "c.toml"})
    return one, other


def assert_isolated(agent: NodeProcess, one: Path, other: Path, calm: Path) -> None:
    """The hostile volume failed in one line and kept its file; the other one still updates."""
    failed = agent.wait_event("render_failed")
    assert failed["document"].startswith("file:") and "hostile.json" in failed["document"]
    assert "\n" not in failed["reason"] and "7777" not in failed["reason"]
    assert "9000" in (read(one / "c.toml") or "")
    calm.write_text(json.dumps({"port": 7100}))
    wait_for(lambda: "7100" in (read(other / "c.toml") or ""), what="the other volume updates")
    assert agent.proc.poll() is None


@pytest.mark.parametrize("name", ["deep", "digits", "surrogate"])
def test_a_hostile_document_fails_only_its_own_volume(node: Node, name: str) -> None:
    from tests.fixtures.hostile_documents import HOSTILE

    hostile, calm = two_documents(node)
    agent = node.start()
    one, other = publish_both(agent, node, hostile, calm)
    hostile.write_text(HOSTILE[name])
    assert_isolated(agent, one, other, calm)


@pytest.mark.parametrize("name", ["deep", "digits", "surrogate"])
def test_a_hostile_document_replayed_after_a_restart_does_not_crash_loop(
    node: Node, name: str
) -> None:
    from tests.fixtures.hostile_documents import HOSTILE

    hostile, calm = two_documents(node)
    first = node.start()
    one, other = publish_both(first, node, hostile, calm)
    assert first.stop() == 0
    hostile.write_text(HOSTILE[name])  # arrives while the node agent is away
    again = node.start()
    assert again.wait_event("volumes_restored")["volumes"] == 2
    assert_isolated(again, one, other, calm)
