"""Plugins written for another core, as real distributions in a fresh virtualenv.

Next to the worked tenth store (``examples/tenth-store``, plugin API ``>=1.0,<2``) the venv holds
three distributions built here from it: one written for a future core (``>=2.0,<3``), one for
a past one (``>=0.1,<1``), and one whose plugin module no longer imports against this core.
Each is refused alone, by discovery and by ``dynconf plugins check``, with one sentence naming
both versions and the package to upgrade; the tenth store and the built-ins keep loading.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import dynconf
from dynconf.plugins import PLUGIN_API_VERSION
from tests.fixtures.uv import Uv

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tenth-store"
CORE = f"dynconf-core {dynconf.__version__} provides plugin API {PLUGIN_API_VERSION}"

pytestmark = [pytest.mark.slow]


def _run(*argv: str, cwd: Path = REPO) -> str:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _variant(into: Path, store: str, declared: str, *, broken: bool = False) -> Path:
    """The tenth store copied under another distribution, module and store name."""
    package = f"dynconf_store_{store}"
    root = into / f"dynconf-store-{store}"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "src" / "dynconf_store_http").rename(root / "src" / package)
    for path in [root / "pyproject.toml", *(root / "src" / package).glob("*.py")]:
        text = path.read_text().replace("dynconf_store_http", package)
        text = text.replace('name = "dynconf-store-http"', f'name = "dynconf-store-{store}"')
        text = text.replace(f'http = "{package}.plugin"', f'{store} = "{package}.plugin"')
        text = text.replace('name = "http"', f'name = "{store}"')
        text = text.replace(
            'DYNCONF_PLUGIN_API: Final = ">=1.0,<2"', f"DYNCONF_PLUGIN_API = {declared!r}"
        )
        path.write_text(text)
    plugin = root / "src" / package / "plugin.py"
    assert f"DYNCONF_PLUGIN_API = {declared!r}" in plugin.read_text()
    if broken:  # what a plugin built against a core with other names meets at import
        plugin.write_text("from dynconf.plugins import hookimpl, a_name_core_never_had\n")
    return root


@dataclass(frozen=True)
class Venv:
    root: Path

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DYNCONF_")}
        env.pop("VIRTUAL_ENV", None)
        return subprocess.run(
            [str(self.root / "bin" / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, uv_bin: Uv) -> Venv:
    prefix = tmp_path_factory.mktemp("plugin-api")
    root = prefix / "venv"
    python = str(root / "bin" / "python")
    uv = str(uv_bin.path)
    requirements = prefix / "requirements.txt"
    _run(uv, "venv", "--quiet", "--python", sys.executable, str(root))
    _run(uv, "export", "--quiet", "--frozen", "--no-dev", "--no-emit-workspace", "--no-hashes",
         "--package", "dynconf-k8s", "--output-file", str(requirements))  # fmt: skip
    uv_bin.fetch(requirements)
    _run(uv, "pip", "install", "--quiet", "--offline", "--python", python, "-r", str(requirements))
    variants = [
        _variant(prefix, "future", ">=2.0,<3"),
        _variant(prefix, "legacy", ">=0.1,<1"),
        _variant(prefix, "stale", ">=1.0,<2", broken=True),
    ]
    _run(uv, "pip", "install", "--quiet", "--offline", "--no-deps", "--python", python,
         "./packages/dynconf-core", "./packages/dynconf-k8s", str(EXAMPLE),
         *map(str, variants))  # fmt: skip
    return Venv(root)


def _reasons(stderr: str) -> dict[str, str]:
    """``dynconf: <reason>`` lines, by the plugin they name."""
    found = {}
    for line in stderr.splitlines():
        for name in ("future", "legacy", "stale", "http"):
            if line.startswith(f"dynconf: the plugin `{name}` "):
                found[name] = line.removeprefix("dynconf: ")
    return found


def test_plugins_check_refuses_each_plugin_for_another_core_and_loads_the_rest(venv: Venv) -> None:
    result = venv.run("dynconf", "plugins", "check")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stdout == f"2 plugins load: builtin, http (plugin API {PLUGIN_API_VERSION})\n"
    reasons = _reasons(result.stderr)
    assert set(reasons) == {"future", "legacy", "stale"}
    assert reasons["future"] == (
        "the plugin `future` (dynconf-store-future 0.1.0) was written for plugin API >=2.0,<3 "
        f"but {CORE}; upgrade dynconf-core to a release that provides plugin API >=2.0,<3"
    )
    assert reasons["legacy"] == (
        "the plugin `legacy` (dynconf-store-legacy 0.1.0) was written for plugin API >=0.1,<1 "
        f"but {CORE}; upgrade dynconf-store-legacy to a release written for plugin API "
        f"{PLUGIN_API_VERSION}"
    )
    assert reasons["stale"].startswith(
        "the plugin `stale` (dynconf-store-stale 0.1.0) does not import (ImportError) with "
        f"dynconf-core {dynconf.__version__}; reinstall dynconf-store-stale, or upgrade it"
    )


def test_discovery_in_a_process_keeps_the_compatible_store_and_logs_each_refusal(
    venv: Venv,
) -> None:
    script = (
        "from dynconf.logs import configure_logging; configure_logging()\n"
        "from dynconf.plugins import discover\n"
        "r = discover(); print(sorted(r.stores)); print(sorted(x.name for x in r.refused))"
    )
    result = venv.run("python", "-c", script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert {e["plugin"] for e in events if e["event"] == "plugin_refused"} == {
        "future",
        "legacy",
        "stale",
    }
    assert lines[-2:] == ["['file', 'http']", "['future', 'legacy', 'stale']"]


def test_rendering_from_a_refused_store_says_why_it_is_missing(venv: Venv, tmp_path: Path) -> None:
    result = venv.run("dynconf", "render", "--source", "future", "--endpoint",
                      "http://127.0.0.1:9/documents", "--key", "app.json",
                      "--out", str(tmp_path / "app.toml"))  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert (
        "no store is named `future`: the plugin `future` (dynconf-store-future 0.1.0) was "
        "written for plugin API >=2.0,<3"
    ) in result.stderr
    assert not (tmp_path / "app.toml").exists()


def test_a_lock_pinning_a_plugin_for_another_core_is_refused_by_plugins_check(
    venv: Venv, tmp_path: Path
) -> None:
    lock = tmp_path / "plugins.lock"
    plugins = [{"distribution": "dynconf-store-http", "version": "0.1.0", "name": "http",
                "value": "dynconf_store_http.plugin"},
               {"distribution": "dynconf-store-future", "version": "0.1.0", "name": "future",
                "value": "dynconf_store_future.plugin"}]  # fmt: skip
    lock.write_text(json.dumps({"version": 1, "group": "dynconf", "plugins": plugins}))
    result = venv.run("dynconf", "plugins", "check", str(lock))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr == (
        "dynconf: the plugin `future` (dynconf-store-future 0.1.0) was written for plugin API "
        f">=2.0,<3 but {CORE}; upgrade dynconf-core to a release that provides plugin API "
        ">=2.0,<3\n"
    )


def test_plugins_lock_writes_no_lock_while_a_plugin_is_refused(venv: Venv, tmp_path: Path) -> None:
    result = venv.run("dynconf", "plugins", "lock", "--output", str(tmp_path / "plugins.lock"))
    assert result.returncode == 1
    assert "no lock written" in result.stderr
    assert not (tmp_path / "plugins.lock").exists()


def test_the_agent_refuses_a_refused_store_at_start_saying_why(venv: Venv, tmp_path: Path) -> None:
    out = tmp_path / "app.json"
    result = venv.run("dynamic-config-agent", "--source", "future", "--endpoint",
                      "http://127.0.0.1:9/documents", "--key", "app.json", "--out", str(out),
                      "--one-shot")  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    reasons = [
        json.loads(line).get("reason", "")
        for line in result.stdout.splitlines()
        if line.startswith("{") and '"agent_failed"' in line
    ]
    assert reasons == [
        "the future store did not load: the plugin `future` (dynconf-store-future 0.1.0) was "
        f"written for plugin API >=2.0,<3 but {CORE}; upgrade dynconf-core to a release that "
        "provides plugin API >=2.0,<3"
    ]
    assert not out.exists()
