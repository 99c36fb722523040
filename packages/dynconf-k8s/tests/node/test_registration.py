"""The kubelet's plugin registration served by the node agent (``--kubelet-registration-path``).

The node agent process runs as the DaemonSet runs it; the test plays the kubelet's plugin
watcher over the real Unix socket with a grpc client built from the package's own generated
messages: ``GetInfo``, then ``NotifyRegistrationStatus``.  The e2e leg
(``tests/e2e/test_node_agent.py``) checks the real kubelet puts the driver in ``CSINode``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from dynconf_k8s.node._generated import pluginregistration_pb2 as reg
from dynconf_k8s.node.main import UsageError, parse_settings
from dynconf_k8s.node.registration import METHODS, SERVICE
from dynconf_k8s.node.service import DRIVER_NAME

from .conftest import DEADLINE, Node, NodeProcess, wait_for

HOST_SOCKET = "/var/lib/kubelet/plugins/config.dynamic-config.rs/csi.sock"


class Watcher:
    """The kubelet's side of the registration socket."""

    def __init__(self, socket: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.calls = {
            name: self.channel.unary_unary(
                f"/{SERVICE}/{name}",
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString,
            )
            for name, (_attr, request, response) in METHODS.items()
        }

    def call(self, name: str, request: Any) -> Any:
        return self.calls[name](request, timeout=DEADLINE)

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def registry(node: Node) -> Path:
    return node.root / "plugins_registry"


@pytest.fixture
def registered(node: Node, registry: Path) -> Iterator[tuple[NodeProcess, Watcher]]:
    process = node.start(
        "--kubelet-registration-path", HOST_SOCKET, "--registration-dir", str(registry)
    )
    process.wait_event("registration_serving")
    watcher = Watcher(registry / f"{DRIVER_NAME}-reg.sock")
    try:
        yield process, watcher
    finally:
        watcher.close()


def test_get_info_names_a_csi_plugin_at_the_kubelets_socket_path(
    registered: tuple[NodeProcess, Watcher],
) -> None:
    _process, watcher = registered
    info = watcher.call("GetInfo", reg.InfoRequest())
    assert info.type == "CSIPlugin"
    assert info.name == DRIVER_NAME
    assert info.endpoint == HOST_SOCKET
    assert list(info.supported_versions) == ["1.0.0"]


def test_the_socket_is_named_as_the_registrar_names_it(
    registered: tuple[NodeProcess, Watcher], registry: Path
) -> None:
    assert [p.name for p in registry.iterdir()] == ["config.dynamic-config.rs-reg.sock"]


def test_registration_serves_only_after_the_csi_socket(
    registered: tuple[NodeProcess, Watcher],
) -> None:
    process, _watcher = registered
    events = [line.get("event") for line in process.lines]
    assert events.index("serving") < events.index("registration_serving")


def test_a_successful_registration_is_logged(registered: tuple[NodeProcess, Watcher]) -> None:
    process, watcher = registered
    watcher.call("NotifyRegistrationStatus", reg.RegistrationStatus(plugin_registered=True))
    assert process.wait_event("kubelet_registered")["driver"] == DRIVER_NAME


def test_a_refused_registration_is_logged_with_the_kubelets_reason(
    registered: tuple[NodeProcess, Watcher],
) -> None:
    process, watcher = registered
    watcher.call(
        "NotifyRegistrationStatus",
        reg.RegistrationStatus(plugin_registered=False, error="unsupported version"),
    )
    line = process.wait_event("kubelet_registration_refused")
    assert line["reason"] == "unsupported version"
    assert line["level"] in ("error", "ERROR")


def test_a_stale_socket_is_replaced_at_start(node: Node, registry: Path) -> None:
    registry.mkdir()
    stale = registry / f"{DRIVER_NAME}-reg.sock"
    stale.write_text("left by a killed process")
    process = node.start(
        "--kubelet-registration-path", HOST_SOCKET, "--registration-dir", str(registry)
    )
    process.wait_event("registration_serving")
    watcher = Watcher(stale)
    try:
        assert watcher.call("GetInfo", reg.InfoRequest()).name == DRIVER_NAME
    finally:
        watcher.close()


def test_stopping_removes_the_socket_so_the_kubelet_deregisters(
    registered: tuple[NodeProcess, Watcher], registry: Path
) -> None:
    process, _watcher = registered
    assert process.stop() == 0
    wait_for(lambda: not any(registry.iterdir()), what="the registration socket removed")


def test_without_the_flag_no_registration_socket_is_made(node: Node, registry: Path) -> None:
    process = node.start()
    assert process.events("registration_serving") == []
    assert not registry.exists()


def test_registration_dir_alone_is_refused_with_the_fix() -> None:
    with pytest.raises(UsageError, match="--registration-dir needs --kubelet-registration-path"):
        parse_settings(["--registration-dir", "/registration"], {"KUBE_NODE_NAME": "n"})


def test_a_relative_kubelet_registration_path_is_refused_by_name() -> None:
    with pytest.raises(
        UsageError, match=r"--kubelet-registration-path csi\.sock must be an absolute"
    ):
        parse_settings(["--kubelet-registration-path", "csi.sock"], {"KUBE_NODE_NAME": "n"})


def test_the_flag_defaults_the_registration_dir_to_the_daemonsets_mount() -> None:
    settings = parse_settings(
        ["--kubelet-registration-path", f"unix://{HOST_SOCKET}"], {"KUBE_NODE_NAME": "n"}
    )
    assert settings.registration is not None
    assert str(settings.registration.endpoint) == HOST_SOCKET
    assert settings.registration.socket(DRIVER_NAME) == Path(
        "/registration/config.dynamic-config.rs-reg.sock"
    )


def test_the_usage_text_names_the_flag() -> None:
    node_agent = Path(sys.executable).with_name("dynamic-config-node-agent")
    out = subprocess.run([str(node_agent), "--help"], capture_output=True, text=True, timeout=30)
    assert "--kubelet-registration-path" in out.stdout
