"""Every console script answers ``--version`` and ``--help`` (any command, any position) and
starts nothing doing so.

The scripts are read off the installed distributions' entry points, so a new program is
checked the day it is added. Each runs as a subprocess with an empty environment (no
installation, no node name, no cluster) under a short deadline: a program that starts a
server instead of answering fails by its exit code or by the deadline.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution, entry_points
from pathlib import Path

import pytest

DISTRIBUTIONS = ("dynconf-core", "dynconf-k8s", "dynconf-store-configserver")
DEADLINE = 60


def _scripts() -> dict[str, str]:
    """``{console script: its distribution}`` for every program of ours that is installed."""
    found: dict[str, str] = {}
    for entry in entry_points(group="console_scripts"):
        owner = entry.dist.name if entry.dist is not None else ""
        if owner in DISTRIBUTIONS:
            found[entry.name] = owner
    return found


SCRIPTS = _scripts()


def _run(script: str, *argv: str) -> subprocess.CompletedProcess[str]:
    executable = Path(sys.executable).parent / script
    return subprocess.run(
        [str(executable), *argv],
        capture_output=True, text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_every_program_of_ours_is_checked() -> None:
    assert {
        "dynconf",
        "dynamic-config-webhook",
        "dynamic-config-agent",
        "dynamic-config-operator",
        "dynamic-config-node-agent",
        "dynamic-config-server",
    } <= set(SCRIPTS)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_version_prints_the_program_and_its_distributions_version(script: str) -> None:
    result = _run(script, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{script} {distribution(SCRIPTS[script]).version}\n"


# (script, argv): each must print usage on stdout and exit 0 — a command's --help never runs it
HELP_CASES = [
    ("dynconf", ["--help"]),
    ("dynconf", ["render", "--help"]),
    ("dynconf", ["plugins", "lock", "-h"]),
    ("dynamic-config-webhook", ["--help"]),
    ("dynamic-config-webhook", ["-h"]),
    ("dynamic-config-webhook", ["serve", "--help"]),
    ("dynamic-config-webhook", ["serve", "-h"]),
    ("dynamic-config-webhook", ["validate", "--namespace", "team", "--help", "pod.yaml"]),
    ("dynamic-config-webhook", ["explain", "pod.yaml", "-h"]),
    ("dynamic-config-agent", ["--help"]),
    ("dynamic-config-agent", ["--source", "vault", "--watch", "5", "-h"]),
    ("dynamic-config-operator", ["--help"]),
    ("dynamic-config-node-agent", ["--help"]),
    ("dynamic-config-node-agent", ["--state-dir", "/nonexistent", "-h"]),
    ("dynamic-config-server", ["--help"]),
    ("dynamic-config-server", ["server.toml", "-h"]),
]


@pytest.mark.parametrize(("script", "argv"), HELP_CASES, ids=[" ".join(c[1]) for c in HELP_CASES])
def test_help_prints_usage_and_starts_nothing(script: str, argv: list[str]) -> None:
    result = _run(script, *argv)
    assert result.returncode == 0, result.stderr
    assert "usage" in result.stdout.lower()


def test_a_flags_value_is_not_a_request_for_help() -> None:
    from dynconf.cli import asked_for

    assert asked_for(["--key", "--help"], {"--key"}) is None
    assert asked_for(["--key", "k", "--version"], {"--key"}) == "version"
    assert asked_for(["--meta", "-h"], {"--key"}) == "help"


def test_the_agent_answers_before_reading_a_flag_or_the_environment() -> None:
    # an unknown flag and a missing --source would both be refused by a start
    result = _run("dynamic-config-agent", "--no-such-flag", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("dynamic-config-agent ")


def test_dynconf_help_lists_every_command() -> None:
    import argparse

    from dynconf.cli import _build_parser

    parser = _build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    shown = _run("dynconf", "--help").stdout
    assert set(commands) == {"resolve", "render", "plugins", "explain", "check", "diff"}
    assert all(name in shown for name in commands)
    plugins = _run("dynconf", "plugins", "--help").stdout
    assert all(name in plugins for name in ("list", "lock", "check"))


def test_webhook_help_lists_every_command() -> None:
    from dynconf_k8s.webhook.main import _VALUE_FLAGS

    shown = _run("dynamic-config-webhook", "--help").stdout
    assert set(_VALUE_FLAGS) == {"serve", "validate", "explain"}
    assert all(f"dynamic-config-webhook {name}" in shown for name in _VALUE_FLAGS)
