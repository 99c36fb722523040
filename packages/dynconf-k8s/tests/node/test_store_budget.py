"""The node agent's volumes of one store share one call account and one budget."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Node, read, wait_for


@pytest.fixture
def two_keys(consul_server: Any) -> Iterator[tuple[str, str]]:
    names = tuple(f"node-budget/{uuid.uuid4().hex}.json" for _ in range(2))
    for index, name in enumerate(names):
        consul_server.client.kv.put(name, json.dumps({"n": index + 1}))
    yield names  # type: ignore[misc]
    for name in names:
        consul_server.client.kv.delete(name)


def test_two_volumes_of_one_store_share_one_budgeted_account(
    node: Node, consul_server: Any, two_keys: tuple[str, str]
) -> None:
    agent = node.start(env={"DYNAMIC_CONFIG_STORE_BUDGETS": "consul=2/1"})
    client = agent.client
    assert client is not None
    targets = node.target("a"), node.target("b")
    for index, (target, key) in enumerate(zip(targets, two_keys, strict=True)):
        client.publish(
            target,
            {"source": "consul", "endpoint": consul_server.url, "key": key, "watch-seconds": "1",
             "path": "app.json"},
            volume_id=f"vol-{index}",
        )  # fmt: skip
    for index, target in enumerate(targets):
        assert json.loads(read(target / "app.json") or "{}") == {"n": index + 1}

    def consul_series() -> dict[str, float]:
        samples = agent.store_requests()
        endpoints = {labels["endpoint"] for labels, _ in samples if labels["store"] == "consul"}
        assert endpoints == {consul_server.url.rstrip("/")}, endpoints  # one account, not two
        return {labels["outcome"]: value for labels, value in samples}

    # two documents resyncing every second against 2 calls a second, burst 1: some must wait
    counts = wait_for(lambda: (c := consul_series()).get("budget", 0) >= 1 and c, timeout=30)
    assert counts["ok"] >= 2
    assert len(agent.events("document_watched")) == 2
    assert agent.stop() == 0


def test_a_bad_budget_stops_the_node_agent_naming_the_variable(node: Node) -> None:
    (node.root / "plugin").mkdir(exist_ok=True)
    from .conftest import NodeProcess

    process = NodeProcess(
        node.socket, node.state_dir, [], env={"DYNAMIC_CONFIG_STORE_BUDGETS": "consul=fast"}
    )
    assert process.proc.wait(timeout=20) != 0
    assert process.proc.stderr is not None
    text = "".join(process.raw) + process.proc.stderr.read()
    assert "DYNAMIC_CONFIG_STORE_BUDGETS's consul is not a budget" in text
