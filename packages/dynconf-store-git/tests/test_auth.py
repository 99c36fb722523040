"""Token auth over smart HTTP with basic auth: accepted, refused (401 → auth), never leaked."""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path

import pytest

from dynconf.errors import AuthError, RemoteError

pytestmark = pytest.mark.git


def token_source(make_source, repo, git_server, token, **fields):
    fields.setdefault("auth_username", git_server.user)
    return make_source(repo.auth_url, auth="token", token=token, **fields)


def test_token_is_accepted_as_basic_auth(repo, git_server, make_source):
    source = token_source(make_source, repo, git_server, git_server.password)
    assert source.fetch().text == "greeting: hello\n"


def test_default_username_is_x_access_token(repo, git_server, make_source):
    # the test server checks the name too, so the default name is refused by it
    source = make_source(repo.auth_url, auth="token", token=git_server.password)
    with pytest.raises(AuthError, match="refused the token"):
        source.fetch()


def test_wrong_token_is_an_auth_error_and_never_sent_again(repo, make_source, own_auth_http):
    url = f"{own_auth_http.base}/{repo.name}"
    source = make_source(url, auth="token", token="wrong-token", auth_username="reader")
    with pytest.raises(AuthError, match=r"refused the token \(401\)"):
        source.fetch()
    asked = own_auth_http.requests()
    assert asked == 1  # the token went with the first request: no challenge round trip
    for _ in range(3):
        with pytest.raises(AuthError, match="not sent again"):
            source.fetch()
    assert own_auth_http.requests() == asked
    right = make_source(url, auth="token", token="right-token", auth_username="reader")
    assert right.fetch().text == "greeting: hello\n"


def test_anonymous_read_of_a_protected_repository_is_an_auth_error(repo, make_source):
    with pytest.raises(AuthError, match=r"asks for credentials \(401\)"):
        make_source(repo.auth_url).fetch()


def test_token_file_is_reread_so_a_rotated_token_is_tried(repo, git_server, make_source, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("stale-token\n")
    source = make_source(repo.auth_url, auth="token", auth_token_path=str(token_file),
                         auth_username=git_server.user)  # fmt: skip
    with pytest.raises(AuthError):
        source.fetch()
    with pytest.raises(AuthError, match="not sent again"):
        source.fetch()
    token_file.write_text(git_server.password + "\n")
    assert source.fetch().text == "greeting: hello\n"


def test_missing_repository_is_remote_even_when_named_like_a_status(git_server, make_source):
    with pytest.raises(RemoteError) as caught:
        make_source(git_server.http_url.rsplit("/", 1)[0] + "/401.git", "403.yaml").fetch()
    assert not isinstance(caught.value, AuthError)


def _cmdlines() -> list[bytes]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                found.append((proc / "cmdline").read_bytes())
    return found


def test_token_never_in_errors_logs_process_list_or_clone(repo, git_server, make_source, caplog,
                                                          tmp_path):  # fmt: skip
    secret = "planted-" + git_server.password[::-1]
    caplog.set_level(logging.DEBUG)
    seen: list[bytes] = []
    done = threading.Event()

    def scan() -> None:
        while not done.is_set():
            seen.extend(c for c in _cmdlines() if b"planted-" in c or secret.encode() in c)

    scanner = threading.Thread(target=scan, daemon=True)
    scanner.start()
    messages = []
    try:
        for _ in range(3):
            source = token_source(make_source, repo, git_server, secret)
            with pytest.raises(AuthError) as caught:
                source.fetch()
            messages += [str(caught.value), repr(caught.value), source.describe(), repr(source)]
        good = token_source(make_source, repo, git_server, git_server.password)
        good.fetch()
        messages += [good.describe(), repr(good)]
    finally:
        done.set()
        scanner.join(5)
    assert seen == []
    assert not any(secret in m or git_server.password in m for m in messages)
    assert secret not in caplog.text and git_server.password not in caplog.text
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode() not in data and git_server.password.encode() not in data
