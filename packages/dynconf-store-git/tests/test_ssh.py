"""ssh: a deploy key with IdentitiesOnly, and host keys only ever from a pin, never first use."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from dynconf.errors import AuthError, BackendError, RemoteError
from dynconf.stores import StoreSpec
from dynconf_store_git.plugin import GitStoreType

pytestmark = pytest.mark.git


def host_line(ssh_server, public_key: Path | None = None) -> str:
    """The known_hosts line for the test sshd (``public_key``: claim another key for it)."""
    kind, key = (public_key or ssh_server.host_key_pub).read_text().split()[:2]
    return f"[127.0.0.1]:{ssh_server.port} {kind} {key}\n"


@pytest.fixture
def pinned(ssh_server, tmp_path) -> dict[str, str]:
    """The ``extra`` that pins the test sshd's real host key."""
    known = tmp_path / "known_hosts"
    known.write_text(host_line(ssh_server))
    return {"known_hosts": str(known)}


@pytest.fixture
def unpinned_store(tmp_path) -> GitStoreType:
    """The git store type with an image that carries no /etc/ssh/ssh_known_hosts."""
    store = GitStoreType()
    store.system_known_hosts = str(tmp_path / "no-system-known-hosts")
    return store


def ssh_spec(url: str, tmp_path: Path, **fields) -> StoreSpec:
    extra = {"cache_dir": str(tmp_path / "cache"), **fields.pop("extra", {})}
    return StoreSpec.from_inputs(source="git", endpoint=url, key="app.yaml", extra=extra, **fields)


def test_ssh_without_a_pinned_host_key_is_refused_naming_the_secret_key(
    repo, ssh_server, unpinned_store, tmp_path
):
    spec = ssh_spec(ssh_server.url(repo), tmp_path, ssh_key=str(ssh_server.user_key))
    with pytest.raises(BackendError) as caught:
        unpinned_store.build(spec)
    message = str(caught.value)
    assert "`known_hosts` key to the ssh-secret Secret" in message
    assert "never trusted on first use" in message
    assert not (tmp_path / "cache").exists()  # refused before anything was contacted


def test_known_hosts_beside_the_key_pins_the_host(repo, ssh_server, unpinned_store, tmp_path):
    # the ssh-secret Secret mounted as the webhook mounts it: ssh-privatekey + known_hosts
    secret = tmp_path / "ssh"
    secret.mkdir()
    key = secret / "ssh-privatekey"
    key.write_bytes(ssh_server.user_key.read_bytes())
    os.chmod(key, 0o400)
    (secret / "known_hosts").write_text(host_line(ssh_server))
    source = unpinned_store.build(ssh_spec(ssh_server.url(repo), tmp_path, ssh_key=str(key)))
    assert source.fetch().text == "greeting: hello\n"


def test_image_known_hosts_pins_the_host(repo, ssh_server, tmp_path):
    store = GitStoreType()
    system = tmp_path / "ssh_known_hosts"
    system.write_text(host_line(ssh_server))
    store.system_known_hosts = str(system)
    source = store.build(ssh_spec(ssh_server.url(repo), tmp_path, ssh_key=str(ssh_server.user_key)))
    assert source.fetch().text == "greeting: hello\n"


def test_known_hosts_setting_pins_the_host(repo, ssh_server, make_source, pinned):
    source = make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key), extra=pinned)
    assert source.fetch().text == "greeting: hello\n"
    assert source.fetch().text == "greeting: hello\n"


def test_unreadable_known_hosts_setting_is_refused(repo, ssh_server, make_source, tmp_path):
    with pytest.raises(BackendError, match="cannot be read"):
        make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key),
                    extra={"known_hosts": str(tmp_path / "missing")})  # fmt: skip


def test_host_key_not_matching_the_pin_is_refused(repo, ssh_server, make_source, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(host_line(ssh_server, ssh_server.other_key.with_suffix(".pub")))
    source = make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key),
                         extra={"known_hosts": str(known)})  # fmt: skip
    with pytest.raises(AuthError, match="host key"):
        source.fetch()


def test_host_missing_from_the_pin_is_refused_not_trusted(repo, ssh_server, make_source, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(host_line(ssh_server).replace("[127.0.0.1]", "[git.elsewhere.test]"))
    source = make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key),
                         extra={"known_hosts": str(known)})  # fmt: skip
    with pytest.raises(AuthError, match="not listed there"):
        source.fetch()
    assert "127.0.0.1" not in known.read_text()  # nothing was added to the pin


def test_ssh_key_is_implied_by_the_key(repo, ssh_server, make_source, pinned):
    source = make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key), extra=pinned)
    assert source.fetch().text == "greeting: hello\n"


def test_refused_key_is_an_auth_error_never_retried(repo, ssh_server, make_source, pinned):
    source = make_source(ssh_server.url(repo), auth="ssh-key", ssh_key=str(ssh_server.other_key),
                         extra=pinned)  # fmt: skip
    with pytest.raises(AuthError, match="did not accept the session"):
        source.fetch()
    with pytest.raises(AuthError, match="not sent again"):
        source.fetch()


def test_unreachable_ssh_host_is_remote(make_source, ssh_server, pinned):
    source = make_source("ssh://root@127.0.0.1:1/srv/x.git", ssh_key=str(ssh_server.user_key),
                         timeout=5.0, extra=pinned)  # fmt: skip
    with pytest.raises(RemoteError) as caught:
        source.fetch()
    assert not isinstance(caught.value, AuthError)


def test_ssh_agent_offers_the_key(repo, ssh_server, make_source, pinned, tmp_path, monkeypatch):
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if sock.exists():
                break
            time.sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(ssh_server.user_key)], env=env, check=True,
                       capture_output=True)  # fmt: skip
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        source = make_source(ssh_server.url(repo), auth="ssh", extra=pinned)
        assert source.fetch().text == "greeting: hello\n"
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(5)


def unlisted_uid() -> int:
    """A uid the machine's user database does not list (what the agent image had for 65532)."""
    import pwd

    listed = {entry.pw_uid for entry in pwd.getpwall()}
    return next(uid for uid in range(65000, 65533) if uid not in listed)


def test_ssh_as_a_uid_without_a_passwd_entry_is_refused_naming_the_uid() -> None:
    from dynconf_store_git.plugin import ssh_user_check

    uid = unlisted_uid()
    with pytest.raises(BackendError) as caught:
        ssh_user_check("git ssh://host/repo", uid)

    assert f"uid {uid}" in str(caught.value)
    assert "/etc/passwd" in str(caught.value)


def test_ssh_as_a_listed_uid_passes() -> None:
    from dynconf_store_git.plugin import ssh_user_check

    ssh_user_check("git ssh://host/repo", os.getuid())
