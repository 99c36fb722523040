"""Run ``dynamic-config-node-agent`` as the DaemonSet does — a real process on a unix socket.

:class:`NodeProcess` starts the console script, follows its JSON log lines, and stops it with
SIGTERM by its own pid. :class:`CsiClient` speaks the CSI wire protocol to the socket with the
package's own generated messages, the way the kubelet does. :class:`Volume` is one inline
volume the test publishes: a target directory shaped like the kubelet's
(``pods/<uid>/volumes/kubernetes.io~csi/<name>/mount``), whose parent exists and whose
``mount`` directory is the plugin's to create.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from prometheus_client.parser import text_string_to_metric_families

from dynconf_k8s.node._generated import csi_pb2 as csi
from dynconf_k8s.node.service import METHODS

NODE_AGENT = Path(sys.executable).with_name("dynamic-config-node-agent")
DEADLINE = 20.0


def wait_for(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.02)


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


class CsiClient:
    """The CSI calls of :data:`METHODS`, over the node agent's socket."""

    def __init__(self, socket: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self._calls: dict[str, Callable[..., Any]] = {}
        for service, methods in METHODS.items():
            for name, (_attr, request, response) in methods.items():
                self._calls[name] = self.channel.unary_unary(
                    f"/{service}/{name}",
                    request_serializer=request.SerializeToString,
                    response_deserializer=response.FromString,
                )

    def call(self, name: str, request: Message, timeout: float = DEADLINE) -> Any:
        return self._calls[name](request, timeout=timeout)

    def raw(self, path: str) -> bytes:
        """Call any method with an empty request (for what is not implemented)."""
        method = self.channel.unary_unary(
            path, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        return method(b"", timeout=DEADLINE)  # type: ignore[no-any-return]

    def publish(
        self,
        target: Path,
        attributes: Mapping[str, str],
        secrets: Mapping[str, str] | None = None,
        volume_id: str = "csi-vol",
    ) -> None:
        self.call(
            "NodePublishVolume",
            csi.NodePublishVolumeRequest(
                volume_id=volume_id,
                target_path=str(target),
                volume_capability=csi.VolumeCapability(
                    mount=csi.VolumeCapability.MountVolume(),
                    access_mode=csi.VolumeCapability.AccessMode(
                        mode=csi.VolumeCapability.AccessMode.SINGLE_NODE_READER_ONLY
                    ),
                ),
                readonly=True,
                secrets=dict(secrets or {}),
                volume_context={
                    "csi.storage.k8s.io/ephemeral": "true",
                    "csi.storage.k8s.io/pod.name": "app",
                    "csi.storage.k8s.io/pod.namespace": "default",
                    **attributes,
                },
            ),
        )

    def unpublish(self, target: Path, volume_id: str = "csi-vol") -> None:
        self.call(
            "NodeUnpublishVolume",
            csi.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=str(target)),
        )

    def close(self) -> None:
        self.channel.close()


@dataclass
class NodeProcess:
    """One node agent subprocess, its log lines and its metrics port."""

    socket: Path
    state_dir: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env = {
            **os.environ,
            "KUBE_NODE_NAME": "node-a",
            "DYNAMIC_CONFIG_METRICS_ADDR": "127.0.0.1:0",
            **self.env,
        }
        env.pop("DYNCONF_PLUGIN_LOCK", None)
        self.proc = subprocess.Popen(
            [
                str(NODE_AGENT),
                "--endpoint",
                f"unix://{self.socket}",
                "--state-dir",
                str(self.state_dir),
                *self.args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self.raw: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.port: int | None = None
        self.client: CsiClient | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            with contextlib.suppress(json.JSONDecodeError):
                self.lines.append(json.loads(line))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if line.get("event") == name]

    def wait_event(self, name: str, count: int = 1) -> dict[str, Any]:
        wait_for(
            lambda: len(self.events(name)) >= count or self.proc.poll() is not None,
            what=f"log event {name!r} x{count}",
        )
        hits = self.events(name)
        assert len(hits) >= count, f"node agent exited ({self.proc.returncode}): {self.raw}"
        return hits[count - 1]

    def ready(self) -> CsiClient:
        self.wait_event("serving")
        self.port = int(self.wait_event("metrics_serving")["address"].rpartition(":")[2])
        self.client = CsiClient(self.socket)
        return self.client

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def gauges(self) -> dict[str, float]:
        """The node's count gauges (the staleness gauge, a function of time, is
        :meth:`staleness`)."""
        return {
            name: value
            for name, value in self._gauges().items()
            if name != "dynamic_config_node_agent_staleness_seconds"
        }

    def staleness(self) -> float:
        return self._gauges()["dynamic_config_node_agent_staleness_seconds"]

    def _gauges(self) -> dict[str, float]:
        status, text = self.get("/metrics")
        assert status == 200
        return {
            sample.name: sample.value
            for family in text_string_to_metric_families(text)
            if family.type == "gauge"
            for sample in family.samples
            if sample.name.startswith("dynamic_config_node_agent_")
        }

    def store_requests(self) -> list[tuple[dict[str, str], float]]:
        """``dynamic_config_node_agent_store_requests_total``'s samples: (labels, value)."""
        status, text = self.get("/metrics")
        assert status == 200
        return [
            (dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            if family.name == "dynamic_config_node_agent_store_requests"
            for sample in family.samples
            if sample.name.endswith("_total")
        ]

    def stop(self) -> int:
        if self.client is not None:
            self.client.close()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(timeout=DEADLINE)


@dataclass
class Node:
    """A node's worth of directories: the plugin dir (socket, records) and the kubelet's pods."""

    root: Path
    started: list[NodeProcess] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        return self.root / "plugin" / "csi.sock"

    @property
    def state_dir(self) -> Path:
        return self.root / "plugin" / "volumes"

    def start(self, *args: str, env: dict[str, str] | None = None) -> NodeProcess:
        (self.root / "plugin").mkdir(exist_ok=True)
        process = NodeProcess(
            self.socket, self.state_dir, ["--allow-file-source", *args], env=env or {}
        )
        self.started.append(process)
        process.ready()
        return process

    def target(self, name: str = "config") -> Path:
        """A fresh kubelet-shaped target path whose parent exists (the kubelet makes that)."""
        pod = uuid.uuid4().hex[:12]
        parent = self.root / "pods" / pod / "volumes" / "kubernetes.io~csi" / name
        parent.mkdir(parents=True)
        return parent / "mount"


@pytest.fixture
def node() -> Iterator[Node]:
    # a short root: a unix socket path must stay under 108 bytes
    root = Path(tempfile.mkdtemp(prefix="dcna-"))
    made = Node(root)
    try:
        yield made
    finally:
        for process in made.started:
            process.stop()
        shutil.rmtree(root, ignore_errors=True)
