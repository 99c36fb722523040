"""The agent image's install steps, run into a fresh venv (there is no Docker engine here).

``docker/Dockerfile.agent`` runs ``docker/agent-install.sh``; running the same script into a
temporary prefix proves it yields an agent that loads all nine stores plus ``file`` from the
lock baked beside it, and renders.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.uv import Uv

REPO = Path(__file__).resolve().parents[4]
NINE = {"consul", "vault", "configserver", "firestore", "git", "redis", "etcd", "nats", "s3"}


@pytest.mark.timeout(600)
def test_install_steps_produce_a_working_agent_with_the_lock(tmp_path: Path, uv_bin: Uv) -> None:
    prefix = tmp_path / "opt"
    installed = subprocess.run(
        [str(REPO / "docker" / "agent-install.sh"), str(prefix)],
        timeout=600,
        capture_output=True,
        text=True,
        env=uv_bin.env(),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    lock = json.loads((prefix / "plugins.lock").read_text())
    assert {p["name"] for p in lock["plugins"]} == NINE | {"builtin"}
    doc = tmp_path / "app.yaml"
    doc.write_text("a: 1\n")
    out = tmp_path / "out" / "app.json"
    out.parent.mkdir()
    result = subprocess.run(
        [
            str(prefix / "venv" / "bin" / "dynamic-config-agent"),
            "--source",
            "file",
            "--key",
            str(doc),
            "--out",
            str(out),
        ],
        env={"DYNCONF_PLUGIN_LOCK": str(prefix / "plugins.lock"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(out.read_text()) == {"a": 1}
    starting = json.loads(result.stdout.splitlines()[0])
    assert starting["event"] == "agent starting"
    assert starting["plugin_lock"] == str(prefix / "plugins.lock")
