"""A Python application acknowledges with ``DynamicConfig.fingerprint()`` and is believed.

The agent's ``.meta`` and ``POST /applied`` speak the digest of the rendered bytes; the
library once answered a digest of its parsed section instead, so an application under
``require-ack`` got 409 forever and never became ready. One function now computes both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from dynconf import DynamicConfig

from .conftest import AgentProcess, wait_file, wait_for

Start = Callable[..., AgentProcess]


@pytest.mark.parametrize("out", ["app.json", "app.yaml", "app.toml", "app.properties"])
def test_library_fingerprint_is_the_agents_and_acknowledges(
    agent: Start, tmp_path: Path, out: str
) -> None:
    document = tmp_path / "store" / "app.yaml"
    document.parent.mkdir()
    document.write_text("db:\n  host: db-1\n  port: 5432\nflags:\n  beta: true\n")
    rendered = tmp_path / "config" / out
    rendered.parent.mkdir()
    process = agent(
        "--source",
        "file",
        "--key",
        str(document),
        "--out",
        str(rendered),
        "--watch",
        "1",
        "--metrics-addr",
        "127.0.0.1:0",
        "--require-ack",
        "--meta",
    )
    wait_file(rendered, lambda text: "db-1" in text)
    meta = rendered.parent / f".{out}.meta"
    wait_for(meta.exists, what="the meta file")

    config = DynamicConfig(None, "db").file(rendered).env("APP_")
    config.init()
    published = json.loads(meta.read_text())["fingerprint"]
    assert config.fingerprint() == published
    assert process.get("/applied", config.fingerprint().encode() + b"\n") == (200, "current\n")
    assert process.get("/readyz") == (200, "ok\n")
