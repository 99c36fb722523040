"""csi-sanity (kubernetes-csi/csi-test) against the node agent's socket.

Every Identity and Node spec that applies to a node-only driver runs. Skipped, because they
test controller capabilities this driver does not advertise:

* ``[Controller Server]`` and ``[GroupController …]`` — the Controller and GroupController
  services (CreateVolume, snapshots, expansion, modification);
* ``Node Service NodeUnpublishVolume should remove target path`` — it first provisions a
  volume with the controller's ``CreateVolume``. The behaviour it checks (unpublish removes
  the target the plugin created) is covered by ``test_unpublish_removes_the_reader…``.

The Node specs' shared setup in csi-test v5.4.0 asks the *controller* endpoint for its
capabilities even when the driver advertises no controller (csi-test issue #595, fixed by
#597 after v5.4.0). So that setup can run, ``--csi.controllerendpoint`` points at a stub
served by this test — the stub answers ControllerGetCapabilities with one UNKNOWN capability
and Identity like the driver; it is test scaffolding, never part of the node agent, and
every spec above runs against the node agent's own socket.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from dynconf_k8s.node._generated import csi_pb2 as csi
from dynconf_k8s.node.service import DRIVER_NAME

from .conftest import Node

SKIPPED = (
    r"\[Controller Server\]",
    r"\[GroupController",
    r"should remove target path",
)

# ControllerGetCapabilitiesResponse{capabilities: [ControllerServiceCapability{rpc: RPC{}}]}:
# field 1 (capabilities) → field 1 (rpc) → an empty RPC, whose type is UNKNOWN (0).
_ONE_UNKNOWN_CAPABILITY = b"\x0a\x02\x0a\x00"


def _raw(answer: bytes) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        lambda request, context: answer,
        request_deserializer=lambda data: data,
        response_serializer=lambda data: data,
    )


@pytest.fixture
def controller_stub(node: Node) -> Iterator[Path]:
    socket = node.root / "controller.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "csi.v1.Controller",
                {"ControllerGetCapabilities": _raw(_ONE_UNKNOWN_CAPABILITY)},
            ),
            grpc.method_handlers_generic_handler(
                "csi.v1.Identity",
                {
                    "GetPluginInfo": _raw(
                        csi.GetPluginInfoResponse(name=DRIVER_NAME).SerializeToString()
                    ),
                    "GetPluginCapabilities": _raw(b""),
                    "Probe": _raw(b""),
                },
            ),
        )
    )
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    yield socket
    server.stop(grace=None)


def test_csi_sanity_passes_for_a_node_only_driver(
    node: Node, csi_sanity_bin: Path, controller_stub: Path
) -> None:
    agent = node.start()
    mounts = node.root / "sanity"
    mounts.mkdir()
    result = subprocess.run(
        [
            str(csi_sanity_bin),
            f"--csi.endpoint=unix://{agent.socket}",
            f"--csi.controllerendpoint=unix://{controller_stub}",
            f"--csi.mountdir={mounts / 'mount'}",
            f"--csi.stagingdir={mounts / 'staging'}",
            "--ginkgo.no-color",
            f"--ginkgo.json-report={mounts / 'report.json'}",
            *(f"--ginkgo.skip={pattern}" for pattern in SKIPPED),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = result.stdout + result.stderr
    summary = re.search(r"Ran (\d+) of (\d+) Specs.*", output)
    counts = re.search(r"(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped", output)
    print(summary.group(0) if summary else "no summary", counts.group(0) if counts else "")
    report = json.loads((mounts / "report.json").read_text())
    for spec in report[0].get("SpecReports") or []:
        if spec.get("LeafNodeType") == "It":
            name = " ".join(
                [*spec.get("ContainerHierarchyTexts", []), spec.get("LeafNodeText", "")]
            )
            print(f"{spec['State']:8} {name}")
    assert result.returncode == 0, output[-6000:]
    assert counts is not None and int(counts.group(1)) > 0 and counts.group(2) == "0", output[
        -3000:
    ]
