"""The pytest plugin, as a user's suite meets it: loaded by its entry point in a fresh run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

USER_SUITE = """
from pydantic import BaseModel
from dynconf import DynamicConfig


class Db(BaseModel):
    host: str
    port: int


def test_a_workspace_is_the_working_directory(dynconf_workspace):
    dynconf_workspace.write("app.toml", '[db]\\nhost = "h"\\nport = 1\\n')
    dynconf_workspace.isolate_env("PLUGINTEST_")
    dynconf_workspace.env(PLUGINTEST_DB_PORT="2")
    config = DynamicConfig(Db, "db").file("app.toml").env("PLUGINTEST_")
    assert config.init().port == 2


def test_the_shell_environment_does_not_leak_in(dynconf_env):
    dynconf_env("PLUGINTEST_")
    import os
    assert "PLUGINTEST_DB_HOST" not in os.environ


def test_a_later_test_sees_the_environment_restored():
    import os
    assert os.environ["PLUGINTEST_DB_HOST"] == "from-the-shell"
    assert "PLUGINTEST_DB_PORT" not in os.environ
"""


def run_suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user.py").write_text(USER_SUITE, encoding="utf-8")
    env = {**os.environ, "PLUGINTEST_DB_HOST": "from-the-shell"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args,
         "test_user.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_entry_point_gives_a_suite_the_fixtures(tmp_path: Path) -> None:
    result = run_suite(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


def test_with_autoload_off_the_plugin_is_asked_for_by_name(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; "
         "print([e.value for e in m.entry_points(group='pytest11') if e.name == 'dynconf'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert result.stdout.strip() == "['dynconf.pytest_plugin']"
    (tmp_path / "test_user.py").write_text(USER_SUITE, encoding="utf-8")
    env = {
        **os.environ,
        "PLUGINTEST_DB_HOST": "from-the-shell",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    named = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "dynconf.pytest_plugin",
         "test_user.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert named.returncode == 0, named.stdout + named.stderr
    assert "3 passed" in named.stdout
