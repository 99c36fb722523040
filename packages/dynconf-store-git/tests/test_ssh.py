"""ssh: a deploy key with IdentitiesOnly, host keys pinned on first use or from a file."""

from __future__ import annotations

import pytest

from dynconf.errors import AuthError, RemoteError

pytestmark = pytest.mark.git


def test_ssh_key_reads_and_pins_the_host_on_first_use(repo, ssh_server, make_source, tmp_path):
    source = make_source(ssh_server.url(repo), auth="ssh-key", ssh_key=str(ssh_server.user_key))
    assert source.fetch().text == "greeting: hello\n"
    [pinned] = list((tmp_path / "cache").glob("*/known_hosts"))
    assert ssh_server.host_key_pub.read_text().split()[1] in pinned.read_text()
    assert source.fetch().text == "greeting: hello\n"  # the pin now verifies


def test_ssh_key_is_implied_by_the_key_and_scp_form_works(repo, ssh_server, make_source):
    # scp-like syntax has no port: reach sshd through ssh's own Port option via ssh://
    source = make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key))
    assert source.fetch().text == "greeting: hello\n"


def test_refused_key_is_an_auth_error_never_retried(repo, ssh_server, make_source):
    source = make_source(ssh_server.url(repo), auth="ssh-key", ssh_key=str(ssh_server.other_key))
    with pytest.raises(AuthError, match="did not accept the session"):
        source.fetch()
    with pytest.raises(AuthError, match="not sent again"):
        source.fetch()


def test_known_hosts_file_pins_the_host(repo, ssh_server, make_source, tmp_path):
    known = tmp_path / "known_hosts"
    key = ssh_server.host_key_pub.read_text().split()
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {key[0]} {key[1]}\n")
    source = make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key),
                         extra={"known_hosts": str(known)})  # fmt: skip
    assert source.fetch().text == "greeting: hello\n"


def test_host_key_not_matching_the_pin_is_refused(repo, ssh_server, make_source, tmp_path):
    known = tmp_path / "known_hosts"
    other = ssh_server.other_key.with_suffix(".pub").read_text().split()
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {other[0]} {other[1]}\n")
    source = make_source(ssh_server.url(repo), ssh_key=str(ssh_server.user_key),
                         extra={"known_hosts": str(known)})  # fmt: skip
    with pytest.raises(AuthError, match="host key"):
        source.fetch()


def test_unreachable_ssh_host_is_remote(make_source, ssh_server, tmp_path):
    source = make_source("ssh://root@127.0.0.1:1/srv/x.git", ssh_key=str(ssh_server.user_key),
                         timeout=5.0)  # fmt: skip
    with pytest.raises(RemoteError) as caught:
        source.fetch()
    assert not isinstance(caught.value, AuthError)


def test_ssh_agent_offers_the_key(repo, ssh_server, make_source, tmp_path, monkeypatch):
    import os
    import signal
    import subprocess

    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if sock.exists():
                break
            __import__("time").sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(ssh_server.user_key)], env=env, check=True,
                       capture_output=True)  # fmt: skip
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        source = make_source(ssh_server.url(repo), auth="ssh")
        assert source.fetch().text == "greeting: hello\n"
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(5)
