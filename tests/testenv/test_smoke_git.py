"""The git_server fixture gives working git servers: clone, push, ls-remote, basic auth."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fixtures.servers import GitServer

pytestmark = pytest.mark.git

NO_PROMPT = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}


def _ls_remote(url: str) -> dict[str, str]:
    import git

    out = git.cmd.Git().execute(["git", "ls-remote", url], env={**os.environ, **NO_PROMPT})
    assert isinstance(out, str)
    return {ref: sha for sha, ref in (line.split("\t") for line in out.splitlines())}


def test_push_over_http_shows_in_ls_remote(git_server: GitServer, tmp_path: Path) -> None:
    import git

    clone = git.Repo.clone_from(git_server.http_url, tmp_path / "work", branch=git_server.branch)
    assert (tmp_path / "work" / "app.yaml").read_text().startswith("greeting: hello")
    (tmp_path / "work" / "app.yaml").write_text("greeting: bye\n")
    clone.index.add(["app.yaml"])
    actor = git.Actor("smoke", "smoke@dynconf.test")
    commit = clone.index.commit("change greeting", author=actor, committer=actor)
    clone.remote("origin").push(git_server.branch).raise_if_error()

    refs = _ls_remote(git_server.daemon_url)
    assert refs[f"refs/heads/{git_server.branch}"] == commit.hexsha


def test_seeding_commit_is_served(git_server: GitServer) -> None:
    sha = git_server.commit_file("extra.yaml", "a: 1\n", "seed extra")
    assert _ls_remote(git_server.http_url)[f"refs/heads/{git_server.branch}"] == sha


def test_basic_auth_is_required(git_server: GitServer) -> None:
    import git

    with pytest.raises(git.GitCommandError):
        _ls_remote(git_server.http_auth_url)
    assert "HEAD" in _ls_remote(git_server.http_auth_url_with_credentials)
