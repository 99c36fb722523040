"""The agent counts its store calls on /metrics and holds them to ``--store-budget``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import AgentProcess, wait_file

Start = Callable[..., AgentProcess]


@pytest.fixture
def consul_key(consul_server: Any) -> Iterator[str]:
    name = f"agent-budget/{uuid.uuid4().hex}.json"
    consul_server.client.kv.put(name, json.dumps({"db": "db-1"}))
    yield name
    consul_server.client.kv.delete(name)


def requests_by_outcome(process: AgentProcess) -> dict[str, float]:
    _status, text = process.get("/metrics")
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "dynamic_config_agent_store_requests":
            assert family.type == "counter"
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    assert set(sample.labels) == {"store", "endpoint", "outcome"}
                    assert sample.labels["store"] == "consul"
                    out[sample.labels["outcome"]] = sample.value
                    endpoint = sample.labels["endpoint"]
                    assert endpoint.startswith("http://127.0.0.1:") and endpoint.count("/") == 2
    return out


def test_agent_exposes_its_store_calls_by_outcome(
    agent: Start, consul_server: Any, consul_key: str, tmp_path: Path
) -> None:
    out = tmp_path / "app.json"
    process = agent(
        "--source", "consul", "--endpoint", consul_server.url, "--key", consul_key,
        "--out", str(out), "--watch", "1", "--metrics-addr", "127.0.0.1:0",
    )  # fmt: skip
    wait_file(out, lambda t: "db-1" in t)
    consul_server.client.kv.put(consul_key, json.dumps({"db": "db-2"}))
    wait_file(out, lambda t: "db-2" in t)
    counts = requests_by_outcome(process)
    # the first read, the catch-up read after the watch's prime, the query that primed it
    # and the one that answered the change: each went through one account, counted once
    assert counts["ok"] >= 4
    assert counts.get("budget", 0) == 0
    assert process.stop() == 0


def test_agent_store_budget_counts_the_reads_it_made_wait(
    agent: Start, consul_server: Any, consul_key: str, tmp_path: Path
) -> None:
    out = tmp_path / "app.json"
    process = agent(
        "--source", "consul", "--endpoint", consul_server.url, "--key", consul_key,
        "--out", str(out), "--watch", "1", "--metrics-addr", "127.0.0.1:0",
        "--store-budget", "0.5/1",
    )  # fmt: skip
    wait_file(out, lambda t: "db-1" in t)
    for n in (2, 3):  # each change is one more answered blocking query
        consul_server.client.kv.put(consul_key, json.dumps({"db": f"db-{n}"}))
        wait_file(out, lambda t, n=n: f"db-{n}" in t, timeout=30)
    counts = requests_by_outcome(process)
    # the first read, the catch-up, the priming query and two changes within a few seconds,
    # against a budget of one call per 2 s: some had to wait
    assert counts["budget"] >= 1
    hit = process.wait_event("store_budget_hit")
    assert hit["store"] == "consul" and hit["budget"] == "0.5/1"
    assert process.stop() == 0


def test_bad_store_budget_is_refused_by_name(agent: Start, tmp_path: Path) -> None:
    process = agent(
        "--source", "consul", "--endpoint", "http://127.0.0.1:1", "--key", "a.json",
        "--out", str(tmp_path / "a.json"), "--store-budget", "fast",
    )  # fmt: skip
    assert process.wait_exit() != 0
    text = "".join(process.raw) + process.stderr
    assert "--store-budget is not a budget" in text


def test_each_answered_blocking_query_is_counted(
    agent: Start, consul_server: Any, consul_key: str, tmp_path: Path
) -> None:
    """Consul's watch is a chain of blocking queries; each answered one is a store call."""
    out = tmp_path / "app.json"
    process = agent(
        "--source", "consul", "--endpoint", consul_server.url, "--key", consul_key,
        "--out", str(out), "--watch", "300", "--metrics-addr", "127.0.0.1:0",
    )  # fmt: skip
    wait_file(out, lambda t: "db-1" in t)
    for n in (2, 3, 4):
        consul_server.client.kv.put(consul_key, json.dumps({"db": f"db-{n}"}))
        wait_file(out, lambda t, n=n: f"db-{n}" in t)
    # the first read, the query that primes the index, and one per change (no resync in 300 s)
    assert requests_by_outcome(process)["ok"] >= 5
    assert process.stop() == 0
