"""OTLP traces: sent over OTLP/HTTP only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

A loopback receiver (:mod:`tests.fixtures.otlp`, shared by every process's tracing test) stands
in for the collector and decodes what arrives with the OTLP protobuf messages.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.fixtures.otlp import Receiver

from .conftest import AgentProcess

Start = Callable[..., AgentProcess]


def test_spans_for_fetch_render_and_publish_arrive_without_values(
    agent: Start, otlp_receiver: Receiver, tmp_path: Path
) -> None:
    receiver = otlp_receiver
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
