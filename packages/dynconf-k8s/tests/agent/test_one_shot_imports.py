"""The init agent's start-up budget, pinned as the set of modules its one-shot path imports.

The init container's start → first render is mostly import time (issue 19: ≤ 150 ms against an
interpreter floor of about 20 ms), so what the one-shot path must not import is checked by name
in a fresh interpreter, never timed: prometheus-client (its exposition pulls in ``http.server``,
``wsgiref`` and ``email``; only the sidecar's metrics port needs it), the library engine
(``dynconf.config`` and pydantic: the agent renders documents, it builds no models), a format
the document is not in (TOML's parser and writer load with the first TOML), and the
clients the operator and the templates use (kubernetes, jinja2), and the sidecar's event loop
(anyio and asyncio: one blocking read, render and write need none, and importing them was a
quarter of the start). Every store's plugin module is imported at start (the registry names
them all), so a plugin module imports its transport only in ``build()``: the git store's is
checked here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dynconf.plugins import LOCK_ENV

FORBIDDEN = (
    "prometheus_client",
    "http.server",
    "wsgiref",
    "pydantic",
    "dynconf.config",
    "dynconf.metrics",
    "kubernetes",
    "jinja2",
    "dynconf_store_git.transport",
    "tomllib",
    "tomli_w",
    "anyio",
    "asyncio",
    "dynconf_k8s.agent.loop",
)


def _environment() -> dict[str, str]:
    """This environment without a plugin lock (a test adds one when it wants it)."""
    return {k: v for k, v in os.environ.items() if k != LOCK_ENV}


def _modules(code: str) -> set[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60,
        env=_environment(),
    )  # fmt: skip
    return set(json.loads(result.stdout.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f"{f}.") for f in FORBIDDEN))


def test_importing_the_agent_loads_no_metrics_client_engine_or_cluster_client() -> None:
    assert _heavy(_modules("import dynconf_k8s.agent.main")) == []


def test_a_one_shot_render_loads_no_metrics_client_engine_or_cluster_client(
    tmp_path: Path,
) -> None:
    doc = tmp_path / "doc.yaml"
    doc.write_text("db:\n  host: db-1\n")
    out = tmp_path / "out" / "app.json"
    out.parent.mkdir()
    argv = ["--source", "file", "--key", str(doc), "--out", str(out)]
    modules = _modules(
        "from dynconf_k8s.agent.main import run\n"
        f"assert run({argv!r}, {{}}) == 0, 'the one-shot render failed'\n"
    )
    assert json.loads(out.read_text()) == {"db": {"host": "db-1"}}
    assert _heavy(modules) == []


def test_a_one_shot_render_starts_no_thread(tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text('{"a": 1}')
    out = tmp_path / "app.json"
    argv = ["--source", "file", "--key", str(doc), "--out", str(out)]
    probe = (
        "import json, threading\n"
        "from dynconf_k8s.agent.main import run\n"
        "started = []\n"
        "real = threading.Thread.start\n"
        "def start(self):\n"
        "    started.append(self.name)\n"
        "    real(self)\n"
        "threading.Thread.start = start\n"
        f"assert run({argv!r}, {{}}) == 0\n"
        "print(json.dumps(started))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60,
        env=_environment(),
    )  # fmt: skip
    assert json.loads(result.stdout.splitlines()[-1]) == []
    assert json.loads(out.read_text()) == {"a": 1}


def test_the_first_scrape_builds_the_registry_with_prometheus_client() -> None:
    modules = _modules(
        "from dynconf_k8s.agent.metrics import AgentMetrics, AgentState\n"
        "metrics = AgentMetrics(AgentState())\n"
        "metrics.reconcile.observe(0.02)\n"
        "text = metrics.exposition().decode()\n"
        "assert 'dynamic_config_agent_reconcile_duration_seconds_bucket{le=\"0.05\"} 1.0' in text\n"
        "assert 'dynamic_config_agent_reconcile_duration_seconds_count 1.0' in text\n"
    )
    assert "prometheus_client" in modules


@pytest.mark.parametrize("locked", [False, True], ids=["discovered", "locked"])
def test_a_one_shot_render_loads_the_plugins_once(tmp_path: Path, locked: bool) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text('{"a": 1}')
    out = tmp_path / "out" / "app.json"
    out.parent.mkdir()
    argv = ["--source", "file", "--key", str(doc), "--out", str(out)]
    env = _environment()
    if locked:  # as the agent image runs: DYNCONF_PLUGIN_LOCK names the baked lock
        lock = tmp_path / "plugins.lock"
        dynconf = Path(sys.executable).with_name("dynconf")
        subprocess.run([str(dynconf), "plugins", "lock", "--output", str(lock)], check=True,
                       capture_output=True, env=env)  # fmt: skip
        env[LOCK_ENV] = str(lock)
    probe = (
        "import json, os, sys\n"
        "import dynconf.plugins as plugins\n"
        "loads = []\n"
        "for name in ('discover', 'load_locked'):\n"
        "    real = getattr(plugins, name)\n"
        "    def counted(*a, _real=real, _name=name, **k):\n"
        "        loads.append(_name)\n"
        "        return _real(*a, **k)\n"
        "    setattr(plugins, name, counted)\n"
        "import dynconf_k8s.agent.main\n"
        "main = sys.modules['dynconf_k8s.agent.main']\n"
        "main.discover, main.load_locked = plugins.discover, plugins.load_locked\n"
        f"assert main.run({argv!r}, dict(os.environ)) == 0\n"
        "print(json.dumps(loads))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60,
        env=env,
    )  # fmt: skip
    assert json.loads(result.stdout.splitlines()[-1]) == ["load_locked" if locked else "discover"]


def test_a_locked_one_shot_render_reads_no_installed_metadata(tmp_path: Path) -> None:
    """A locked start checks each pin against its wheel's ``.dist-info`` name: the metadata
    library (and the ``email`` parser under it) is not imported for a dozen version checks."""
    doc = tmp_path / "doc.json"
    doc.write_text('{"a": 1}')
    out = tmp_path / "out" / "app.json"
    out.parent.mkdir()
    lock = tmp_path / "plugins.lock"
    dynconf = Path(sys.executable).with_name("dynconf")
    subprocess.run([str(dynconf), "plugins", "lock", "--output", str(lock)], check=True,
                   capture_output=True, env=_environment())  # fmt: skip
    argv = ["--source", "file", "--key", str(doc), "--out", str(out)]
    probe = (
        "import json, os, sys\n"
        "from dynconf_k8s.agent.main import run\n"
        f"assert run({argv!r}, dict(os.environ)) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60,
        env={**_environment(), LOCK_ENV: str(lock)},
    )  # fmt: skip
    modules = set(json.loads(result.stdout.splitlines()[-1]))
    assert {"importlib.metadata", "email"} & modules == set()
