"""The node agent's OTLP traces: publish, unpublish and the shared fetch, with no value.

The real ``dynamic-config-node-agent`` process (as ``conftest.py`` runs it) with
``OTEL_EXPORTER_OTLP_ENDPOINT`` pointed at the loopback collector of :mod:`tests.fixtures.otlp`;
SIGTERM flushes its spans before it exits.
"""

from __future__ import annotations

import json
import uuid

from tests.fixtures.otlp import Receiver

from .conftest import Node, NodeProcess


def test_publish_fetch_and_unpublish_spans_arrive_without_values(
    node: Node, otlp_receiver: Receiver
) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    store = node.root / "store" / "config.json"
    store.parent.mkdir()
    store.write_text(json.dumps({"db": {"password": secret}}))
    (node.root / "plugin").mkdir(exist_ok=True)
    process = NodeProcess(node.socket, node.state_dir, ["--allow-file-source"],
                          env={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url})  # fmt: skip
    node.started.append(process)
    client = process.ready()
    first, second = node.target(), node.target()
    volume = {"source": "file", "key": str(store), "path": "app.json"}
    client.publish(first, volume)
    client.publish(second, volume)  # joins the document: no second fetch
    assert secret in (first / "app.json").read_text()
    client.unpublish(first)
    assert process.stop() == 0

    spans = otlp_receiver.wait_for(["publish", "fetch", "unpublish"])
    assert {span.service for span in spans} == {"dynamic-config-node-agent"}
    publishes = [span.attributes for span in spans if span.name == "publish"]
    assert [p["outcome"] for p in publishes] == ["published", "published"]
    assert all(p["file"] == "app.json" and p["document"].startswith("file:") for p in publishes)
    fetches = [span.attributes for span in spans if span.name == "fetch"]
    assert fetches[0]["kind"] == "first" and fetches[0]["found"] == "True"
    assert "file" in fetches[0]["store"]
    (unpublish,) = [span.attributes for span in spans if span.name == "unpublish"]
    assert unpublish["known"] == "True"
    assert otlp_receiver.leaked(secret) == []
