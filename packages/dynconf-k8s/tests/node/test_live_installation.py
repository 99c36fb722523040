"""The node agent takes its store budgets from the mounted installation document, live."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import Node


def _document(path: Path, budget: str) -> None:
    scratch = path.with_suffix(".tmp")
    scratch.write_text(f"storeDefaults:\n  consul:\n    store-budget: {budget}\n")
    os.replace(scratch, path)


def test_a_budget_edit_is_applied_and_a_bad_one_is_kept_out(node: Node) -> None:
    document = node.root / "installation.yaml"
    _document(document, '"10/20"')
    agent = node.start(env={"DYNAMIC_CONFIG_NODE_AGENT_INSTALLATION_FILE": str(document)})

    _document(document, "lots")
    refused = agent.wait_event("installation_refused")
    _document(document, '"2/4"')
    applied = agent.wait_event("installation_applied")

    assert "store-budget" in refused["problem"]
    assert (refused["generation"], refused["in_force"]) == (2, 1)
    assert applied["generation"] == 3
    assert agent.stop() == 0


def test_an_invalid_document_at_start_stops_the_node_agent(node: Node) -> None:
    from .conftest import NodeProcess

    document = node.root / "installation.yaml"
    _document(document, "lots")
    (node.root / "plugin").mkdir(exist_ok=True)
    process = NodeProcess(
        node.socket, node.state_dir, [],
        env={"DYNAMIC_CONFIG_NODE_AGENT_INSTALLATION_FILE": str(document)},
    )  # fmt: skip
    assert process.proc.wait(timeout=30) == 1
    assert process.proc.stderr is not None
    assert "store-budget" in process.proc.stderr.read()
