"""Every program reads ``RUST_LOG`` with the one grammar: a bad directive is named and dropped,
the program goes on, and no value of it ends a process with the unexpected-error exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dynconf.logs import UNEXPECTED_EXIT

BIN = Path(sys.executable).parent
BAD = "warn,bad level!,dynconf=loud"


def _run(program: str, *args: str, **env: str) -> tuple[int, list[dict[str, Any]], str]:
    environment = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    done = subprocess.run(
        [str(BIN / program), *args],
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    lines = []
    for text in done.stdout.splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return done.returncode, lines, done.stderr


def _refusals(lines: list[dict[str, Any]]) -> list[str]:
    return [line["reason"] for line in lines if line.get("event") == "log_filter_refused"]


def test_the_agent_names_each_bad_directive_and_renders(tmp_path: Path) -> None:
    (tmp_path / "k.json").write_text('{"a": 1}')
    out = tmp_path / "app.json"
    code, lines, _ = _run(
        "dynamic-config-agent", "--source", "file", "--endpoint", str(tmp_path),
        "--key", "k.json", "--out", str(out), RUST_LOG=BAD,
    )  # fmt: skip
    assert code == 0
    assert json.loads(out.read_text()) == {"a": 1}
    reasons = _refusals(lines)
    assert len(reasons) == 2
    assert "'bad level!' is neither a level nor a target" in reasons[0]
    assert "'dynconf=loud' names no level after '='" in reasons[1]
    # the filter's level applies: warn hides the agent's info lines
    assert not [line for line in lines if line.get("level") == "info"]


def test_the_agent_at_trace_logs_debug_lines(tmp_path: Path) -> None:
    (tmp_path / "k.json").write_text('{"a": 1}')
    out = tmp_path / "app.json"
    args = ("--source", "file", "--endpoint", str(tmp_path), "--key", "k.json", "--out", str(out))
    code, quiet, _ = _run("dynamic-config-agent", *args, RUST_LOG="error")
    assert code == 0 and quiet == []
    code, lines, _ = _run("dynamic-config-agent", *args, RUST_LOG="dynamic_config_agent=trace")
    assert code == 0 and {line["level"] for line in lines} >= {"info"}


def test_the_operator_reads_any_filter_and_refuses_a_bad_worker_count_by_name() -> None:
    for value in ("trace", "info,dynconf=debug", BAD):
        code, lines, _ = _run(
            "dynamic-config-operator", RUST_LOG=value, DYNAMIC_CONFIG_OPERATOR_WORKERS="four"
        )
        assert code == 2, lines
        [refused] = [line for line in lines if line.get("event") == "settings_refused"]
        assert "DYNAMIC_CONFIG_OPERATOR_WORKERS takes a whole number" in refused["problem"]
        assert code != UNEXPECTED_EXIT


def test_the_webhook_and_the_node_agent_name_a_bad_directive_and_go_on() -> None:
    code, lines, stderr = _run("dynamic-config-webhook", "serve", RUST_LOG=BAD)
    assert code == 1 and "no TLS material" in stderr  # it went on to its own checks
    assert len(_refusals(lines)) == 2
    # --help answers before logging is set up; a start without its node name reads the
    # filter, names both bad directives, and ends on its own settings check
    code, lines, stderr = _run("dynamic-config-node-agent", RUST_LOG=BAD, KUBE_NODE_NAME="")
    assert code == 1 and "KUBE_NODE_NAME is required" in stderr
    assert len(_refusals(lines)) == 2
