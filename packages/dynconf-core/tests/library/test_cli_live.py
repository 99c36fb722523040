"""``dynconf explain | check | diff`` against a real service process and its snapshot file.

The service is a Python process that builds its ``DynamicConfig`` with a last-known-good
cache, installs, optionally watches its file, and runs until the test stops it; the CLI is
the installed ``dynconf`` console script, run from the service's directory, as an operator
would run it (``kubectl exec … dynconf diff --model service:config``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SECRET = "hunter2-never-printed"
DYNCONF = str(Path(sys.executable).with_name("dynconf"))

SERVICE = """
import sys, time
from pydantic import BaseModel, SecretStr
from dynconf import DynamicConfig


class Db(BaseModel):
    host: str
    port: int
    password: SecretStr


config = (
    DynamicConfig(Db, "db")
    .file("config.toml")
    .env("SVC_")
    .cache("last-good.json", CACHE_MODE)
)

if __name__ == "__main__":
    config.init()
    watch = config.watch(debounce=0.05, poll_interval=0.05) if "--watch" in sys.argv else None
    print("ready", flush=True)
    sys.stdin.read()  # runs until the test closes its stdin
    if watch is not None:
        watch.stop()
        watch.join(2.0)
"""

GOOD = f'[db]\nhost = "db.internal"\nport = 5432\npassword = "{SECRET}"\n'


class Service:
    """The service process: started in ``directory``, stopped by closing its stdin."""

    def __init__(self, directory: Path, mode: str = "redacted", watch: bool = False) -> None:
        self.directory = directory
        (directory / "service.py").write_text(
            SERVICE.replace("CACHE_MODE", repr(mode)), encoding="utf-8"
        )
        (directory / "config.toml").write_text(GOOD, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
        self.process = subprocess.Popen(
            [sys.executable, "service.py", *(["--watch"] if watch else [])],
            cwd=directory,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    @property
    def cache(self) -> Path:
        return self.directory / "last-good.json"

    def edit(self, old: str, new: str) -> None:
        path = self.directory / "config.toml"
        path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            assert self.process.stdout is not None
            self.process.stdout.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = Service(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[Service]:
    running = Service(tmp_path, watch=True)
    yield running
    running.stop()


def dynconf(directory: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
    result = subprocess.run(
        [DYNCONF, *args],
        cwd=directory,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert SECRET not in result.stdout and SECRET not in result.stderr
    return result


def test_diff_is_clean_exit_0_against_the_process_that_just_installed(service: Service) -> None:
    result = dynconf(service.directory, "diff", "--model", "service:config")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no differences" in result.stdout
    assert "secret paths are not compared (the cache is redacted)" in result.stdout


def test_diff_names_the_paths_an_unapplied_edit_moves_exit_1(service: Service) -> None:
    service.edit("port = 5432", "port = 6543\nuser = 'svc'")
    result = dynconf(service.directory, "diff", "--model", "service:config")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "  port changed" in lines and "  user added" in lines, result.stdout
    assert "5432" not in result.stdout and "6543" not in result.stdout  # no value by default


def test_diff_show_values_prints_old_and_new_and_never_a_secret(tmp_path: Path) -> None:
    running = Service(tmp_path, mode="full")
    try:
        running.edit("port = 5432", "port = 6543")
        running.edit(SECRET, "rotated-" + SECRET)
        result = dynconf(tmp_path, "diff", "--model", "service:config", "--show-values")
    finally:
        running.stop()
    assert result.returncode == 1
    assert "  port changed: 5432 -> 6543" in result.stdout
    assert '  password changed: "***" -> "***"' in result.stdout


def test_diff_follows_the_process_after_it_reloads_a_good_edit(watched: Service) -> None:
    watched.edit("port = 5432", "port = 6543")
    deadline = time.monotonic() + 20
    while "6543" not in watched.cache.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, "the service never rewrote its snapshot"
        time.sleep(0.05)
    result = dynconf(watched.directory, "diff", "--model", "service:config")
    assert result.returncode == 0, result.stdout


def test_check_names_the_refused_field_and_its_layer_while_the_process_keeps_serving(
    watched: Service,
) -> None:
    before = watched.cache.read_bytes()
    watched.edit("port = 5432", 'port = "soon"')
    result = dynconf(watched.directory, "check", "--model", "service:config")
    assert result.returncode == 1
    assert "refused port: Input should be a valid integer" in result.stdout
    assert "in config.toml" in result.stdout
    assert "would not load" in result.stdout
    time.sleep(0.5)  # the watch has long since refused the edit (debounce 0.05 s)
    assert watched.cache.read_bytes() == before  # the running snapshot is unchanged
    diff = dynconf(watched.directory, "diff", "--model", "service:config")
    assert diff.returncode == 1
    assert "a fresh load would be refused" in diff.stdout


def test_check_reports_an_unknown_key_with_a_near_name_exit_1(service: Service) -> None:
    service.edit("port = 5432", "port = 5432\nprot = 1")
    result = dynconf(service.directory, "check", "--model", "service:config")
    assert result.returncode == 1
    assert "prot: the model declares no such key; did you mean `port`?" in result.stdout
    assert "would load" in result.stdout


def test_check_is_exit_0_when_the_sources_load_clean(service: Service) -> None:
    result = dynconf(service.directory, "check", "--model", "service:config", "--json")
    assert result.returncode == 0
    answer = json.loads(result.stdout)
    assert answer["would_load"] and answer["exit"] == 0 and not answer["unknown"]


def test_json_answer_stays_parseable_when_the_service_module_logs(service: Service) -> None:
    module = service.directory / "noisy.py"
    module.write_text(
        "import logging\nfrom service import config\n"
        'logging.getLogger("dynconf.noisy").warning("imported")\n',
        encoding="utf-8",
    )
    result = dynconf(service.directory, "diff", "--model", "noisy:config", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["changes"] == []
    assert '"event": "imported"' in result.stderr


def test_explain_names_the_winning_layer_and_whether_the_process_agrees(service: Service) -> None:
    result = dynconf(
        service.directory, "explain", "port", "--model", "service:config", SVC_DB_PORT="7000"
    )
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "port from SVC_DB_PORT"
    assert "  file (in config.toml)" in result.stdout
    assert "running snapshot (last-good.json, redacted): a different value" in result.stdout
    assert "7000" not in result.stdout


def test_explain_show_values_masks_a_secret_path(service: Service) -> None:
    result = dynconf(
        service.directory, "explain", "password", "--model", "service:config", "--show-values"
    )
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == 'password = "***" (in config.toml)'
    assert "not recorded (a secret path; the cache is redacted)" in result.stdout


def test_explain_of_a_path_nothing_sets_is_exit_1(service: Service) -> None:
    result = dynconf(service.directory, "explain", "pool.size", "--model", "service:config")
    assert result.returncode == 1
    assert result.stdout.startswith("pool.size is not set by any layer")


def test_diff_against_a_fingerprint_cache_reports_keys_and_moved_values(tmp_path: Path) -> None:
    running = Service(tmp_path, mode="fingerprint")
    try:
        running.edit("port = 5432", "port = 6543")
        moved = dynconf(tmp_path, "diff", "--model", "service:config")
        running.edit("port = 6543", "port = 6543\nuser = 'svc'")
        added = dynconf(tmp_path, "diff", "--model", "service:config")
    finally:
        running.stop()
    assert moved.returncode == 1
    assert "the same keys with different values" in moved.stdout
    assert added.returncode == 1
    assert "  user added" in added.stdout


def test_a_dynamic_config_class_names_its_own_sources_model_and_cache(service: Service) -> None:
    (service.directory / "declared.py").write_text(
        "from pydantic import BaseModel, SecretStr\n"
        "from dynconf import Configured, dynamic_config\n\n\n"
        '@dynamic_config(key="db", files=["config.toml"], env="SVC_", cache="last-good.json")\n'
        "class Database(Configured, BaseModel):\n"
        "    host: str\n    port: int\n    password: SecretStr\n",
        encoding="utf-8",
    )
    service.edit("port = 5432", "port = 6543")
    result = dynconf(service.directory, "diff", "--model", "declared:Database")
    assert result.returncode == 1
    assert "  port changed" in result.stdout
    assert "secret paths are not compared" in result.stdout


def test_a_fresh_load_fetches_the_remote_layer_as_the_service_does(service: Service) -> None:
    store = service.directory / "store.json"
    store.write_text('{"db": {"pool": 4}}', encoding="utf-8")
    (service.directory / "remote.py").write_text(
        "from pathlib import Path\n"
        "from dynconf import DynamicConfig\n"
        "from dynconf.file_store import FileSource\n\n"
        'config = DynamicConfig(None, "db", secrets=["password"]).file("config.toml")\n'
        'config.remote(FileSource(Path("store.json").absolute(), "json"))\n'
        'config.cache("remote-good.json")\n',
        encoding="utf-8",
    )
    subprocess.run(  # the service's start: fetch the store, install, write the cache
        [sys.executable, "-c", "import remote; remote.config.init()"],
        cwd=service.directory,
        check=True,
    )
    store.write_text('{"db": {"pool": 8}}', encoding="utf-8")
    result = dynconf(service.directory, "diff", "--model", "remote:config", "--show-values")
    assert result.returncode == 1
    assert "  pool changed: 4 -> 8" in result.stdout


def test_spec_and_model_class_type_a_load_the_service_did_not_build(service: Service) -> None:
    (service.directory / "spec.json").write_text(
        json.dumps({"key": "db", "files": ["config.toml"], "env_prefix": "SVC_"}),
        encoding="utf-8",
    )
    result = dynconf(
        service.directory,
        "diff",
        "--spec",
        "spec.json",
        "--model",
        "service:Db",
        "--snapshot",
        "last-good.json",
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_untyped_spec_masks_the_paths_named_by_secret(service: Service) -> None:
    (service.directory / "spec.json").write_text(
        json.dumps({"key": "db", "files": ["config.toml"]}), encoding="utf-8"
    )
    masked = dynconf(
        service.directory,
        *("explain", "password", "--spec", "spec.json", "--secret", "password", "--show-values"),
    )
    assert masked.returncode == 0
    assert masked.stdout.splitlines()[0] == 'password = "***" (in config.toml)'
    checked = dynconf(service.directory, "check", "--spec", "spec.json")
    assert checked.returncode == 0
    assert "unknown keys: not checked (no model)" in checked.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["diff", "--model", "nowhere:config"], "the module nowhere cannot be imported"),
        (["diff", "--model", "service"], "--model takes module:attribute"),
        (["diff", "--model", "service:Db"], "service:Db has no sources of its own"),
        (["check"], "name the service's configuration with --model module:config"),
        (["diff", "--model", "service:config", "--spec", "x.json"], "drop --spec"),
        (
            ["diff", "--model", "service:config", "--snapshot", "gone.json"],
            "the snapshot file gone.json does not exist",
        ),
        (["diff", "--model", "service:config", "--snapshot", "config.toml"], "not a dynconf cache"),
        (["check", "--model", "service:config", "--colour"], "unrecognized arguments"),
    ],
    ids=[
        "no-module",
        "no-colon",
        "no-sources",
        "nothing",
        "two-sources",
        "no-snapshot",
        "not-a-cache",
        "flag",
    ],
)
def test_usage_error_is_one_line_exit_2(service: Service, args: list[str], says: str) -> None:
    result = dynconf(service.directory, *args)
    assert result.returncode == 2
    assert says in result.stderr
    assert result.stdout == ""


def test_python_dash_m_dynconf_is_the_same_command(service: Service) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dynconf", "diff", "--model", "service:config"],
        cwd=service.directory,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "no differences" in result.stdout
