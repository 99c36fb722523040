"""OTLP traces: sent over OTLP/HTTP only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

A loopback receiver (a tiny HTTP server in the test) stands in for the collector and decodes
what arrives with the OTLP protobuf messages.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .conftest import AgentProcess

Start = Callable[..., AgentProcess]


class Receiver:
    """Collects the bodies POSTed to ``/v1/traces`` and answers 200, as a collector does."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.arrived = threading.Event()
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/v1/traces":
                    received.bodies.append(body)
                    received.arrived.set()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def spans(self) -> list[tuple[str, dict[str, object]]]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        found = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: str(a.value).strip() for a in span.attributes}
                        found.append((span.name, attributes))
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra of dynconf-k8s")
    server = Receiver()
    yield server
    server.close()


def test_spans_for_fetch_render_and_publish_arrive_without_values(
    agent: Start, receiver: Receiver, tmp_path: Path
) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    doc = tmp_path / "doc.json"
    doc.write_text(f'{{"db": {{"password": "{secret}"}}}}')
    out = tmp_path / "out" / "app.yaml"
    out.parent.mkdir()
    process = agent("--source", "file", "--key", str(doc), "--out", str(out),
                    env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})  # fmt: skip
    assert process.wait_exit() == 0
    assert secret in out.read_text()
    # the init container flushes its spans on the way out
    assert receiver.arrived.wait(timeout=10)
    names = [name for name, _ in receiver.spans()]
    assert {"fetch", "render", "publish"} <= set(names), names
    assert all(secret.encode() not in body for body in receiver.bodies)
    fetch = dict(receiver.spans())["fetch"]
    assert "file" in str(fetch["store"])


def test_no_endpoint_no_opentelemetry(tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text('{"a": 1}')
    script = (
        "import sys\n"
        "from dynconf_k8s.agent.main import run\n"
        f"code = run(['--source', 'file', '--key', {str(doc)!r}, '--out', "
        f"{str(tmp_path / 'app.json')!r}], {{}})\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')"
        " or m.startswith('opentelemetry.exporter'))\n"
        "print(code, loaded)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, check=True)  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == "0 []"
