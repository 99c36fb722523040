"""The real ``dynamic-config-agent`` with a git source, as the injected container runs it.

The pod gives the agent a read-only root file system, a home it cannot write (uid 65532) and
one writable volume. Each run here is the console script in a private mount namespace where
``/`` (and ``/dev/shm``) are read-only and only the output directory is writable, with
``HOME`` pointing into the read-only tree: whatever the agent writes outside its volume fails
there as it would in the pod. The volume is also ``noexec``: nothing the agent keeps there
may need to be executed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dynconf_store_git.transport import SYSTEM_KNOWN_HOSTS

pytestmark = pytest.mark.git

AGENT = Path(sys.executable).with_name("dynamic-config-agent")


def read_only_command(
    volume: Path, args: list[str], **env: str
) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run the agent with every path read-only but
    ``volume``; root, so only the mounts stop it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a private mount namespace needs root and unshare")
    volume.mkdir(parents=True, exist_ok=True)
    hide = ""
    if Path(SYSTEM_KNOWN_HOSTS).exists():  # the machine's own pins must not pin our hosts
        hide = f"mount --bind /dev/null {SYSTEM_KNOWN_HOSTS} && "
    # the volume is writable but noexec, as a hardened node may mount an emptyDir
    script = (
        f'mount --bind "$0" "$0" && mount -o remount,bind,noexec "$0" && {hide}'
        'mount -o remount,bind,ro / && mount -o remount,bind,ro /dev/shm && exec "$@"'
    )
    child = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "TMPDIR")}
    child.pop("DYNCONF_PLUGIN_LOCK", None)
    child.update(HOME=str(volume.parent / "home-not-writable"), **env)
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(volume),
               str(AGENT), *args]  # fmt: skip
    return command, child


def run_read_only(args: list[str], volume: Path, **env: str) -> subprocess.CompletedProcess[str]:
    command, child = read_only_command(volume, args, **env)
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=child)


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


def test_sidecar_follows_git_with_a_read_only_root(repo, tmp_path):
    volume = tmp_path / "config"
    out = volume / "app.yaml"
    command, env = read_only_command(
        volume,
        ["--source", "git", "--endpoint", repo.http_url, "--key", "app.yaml", "--out", str(out),
         "--watch", "1"],
    )  # fmt: skip
    agent = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        wait_until(out.is_file, agent)
        repo.commit({"app.yaml": "greeting: changed under a read-only root\n"})
        wait_until(lambda: "changed under" in out.read_text(), agent)
    finally:
        agent.send_signal(signal.SIGTERM)
        stdout, stderr = agent.communicate(timeout=30)
    assert agent.returncode == 0, stdout + stderr
    assert "Traceback" not in stderr


def wait_until(done: Callable[[], bool], agent: subprocess.Popen[str], timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert agent.poll() is None, agent.communicate()
        assert time.monotonic() < deadline, "the agent did not get there in time"
        time.sleep(0.1)


def test_agent_reads_over_ssh_with_the_pin_from_the_ssh_secret(repo, ssh_server, tmp_path):
    # the ssh-secret Secret as the webhook mounts it: the key, and its known_hosts beside it
    secret = tmp_path / "etc-dynamic-config" / "ssh"
    secret.mkdir(parents=True)
    key = secret / "ssh-privatekey"
    key.write_bytes(ssh_server.user_key.read_bytes())
    os.chmod(key, 0o400)
    kind, public = ssh_server.host_key_pub.read_text().split()[:2]
    (secret / "known_hosts").write_text(f"[127.0.0.1]:{ssh_server.port} {kind} {public}\n")
    volume = tmp_path / "config"
    result = run_read_only(
        ["--source", "git", "--endpoint", ssh_server.url(repo), "--key", "app.yaml",
         "--ssh-key", str(key), "--out", str(volume / "app.yaml")],
        volume,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert yaml.safe_load((volume / "app.yaml").read_text()) == {"greeting": "hello"}
