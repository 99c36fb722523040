"""The real ``dynamic-config-agent`` with a git source, as the injected container runs it.

The pod gives the agent a read-only root file system, a home it cannot write (uid 65532) and
one writable volume. Each run here is the console script in a private mount namespace where
``/`` (and ``/dev/shm``) are read-only and only the output directory is writable, with
``HOME`` pointing into the read-only tree: whatever the agent writes outside its volume fails
there as it would in the pod.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dynconf_store_git.transport import SYSTEM_KNOWN_HOSTS

pytestmark = pytest.mark.git

AGENT = Path(sys.executable).with_name("dynamic-config-agent")


def run_read_only(args: list[str], volume: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The agent with every path read-only but ``volume``; root, so only the mounts stop it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a private mount namespace needs root and unshare")
    volume.mkdir(parents=True, exist_ok=True)
    hide = ""
    if Path(SYSTEM_KNOWN_HOSTS).exists():  # the machine's own pins must not pin our hosts
        hide = f"mount --bind /dev/null {SYSTEM_KNOWN_HOSTS} && "
    script = (
        f'mount --bind "$0" "$0" && {hide}mount -o remount,bind,ro / && '
        'mount -o remount,bind,ro /dev/shm && exec "$@"'
    )
    child = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "TMPDIR")}
    child.pop("DYNCONF_PLUGIN_LOCK", None)
    child.update(HOME=str(volume.parent / "home-not-writable"), **env)
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(volume),
         str(AGENT), *args],
        capture_output=True, text=True, timeout=120, env=child,
    )  # fmt: skip


def log_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_agent_renders_from_git_with_a_read_only_root_and_unwritable_home(repo, tmp_path):
    volume = tmp_path / "config"
    result = run_read_only(
        ["--source", "git", "--endpoint", repo.http_url, "--key", "app.yaml",
         "--out", str(volume / "app.yaml")],
        volume,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert yaml.safe_load((volume / "app.yaml").read_text()) == {"greeting": "hello"}
    # the clone cache is the store's private directory beside the file, on the volume
    [clone] = (volume / ".app.yaml.store" / "git").iterdir()
    assert (clone / "repo.git" / "HEAD").is_file()
    assert oct(clone.stat().st_mode & 0o777) == "0o700"


def test_agent_renders_one_section_of_a_git_file(repo, tmp_path):
    repo.commit({"app.yaml": "db:\n  host: db.internal\n  port: 5432\ncache:\n  size: 10\n"})
    volume = tmp_path / "config"
    result = run_read_only(
        ["--source", "git", "--endpoint", repo.http_url, "--key", "app.yaml",
         "--section", "db", "--out", str(volume / "db.json")],
        volume,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((volume / "db.json").read_text()) == {"host": "db.internal", "port": 5432}


def test_agent_refuses_ssh_without_a_pinned_host_key_in_one_line(tmp_path):
    key = tmp_path / "ssh" / "ssh-privatekey"
    key.parent.mkdir()
    key.write_text("not used: the refusal comes before any connection\n")
    volume = tmp_path / "config"
    result = run_read_only(
        ["--source", "git", "--endpoint", "ssh://git@127.0.0.1:1/acme/config.git",
         "--key", "app.yaml", "--ssh-key", str(key), "--out", str(volume / "app.yaml")],
        volume,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [failed] = [line for line in log_lines(result) if line["event"] == "agent_failed"]
    assert "known_hosts" in str(failed["reason"])
    assert "ssh-secret" in str(failed["reason"])
