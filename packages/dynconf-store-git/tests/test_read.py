"""Reading one file of a ref's tree over smart HTTP, the git daemon and a local path."""

from __future__ import annotations

import os
import stat

import pytest

from dynconf.errors import IoError, RemoteError
from dynconf.stores import ABSENT, Fetched, WatchCapability

from .conftest import git

pytestmark = pytest.mark.git


def test_reads_the_file_with_the_commit_as_revision(repo, make_source):
    source = make_source(repo.http_url)
    answer = source.fetch()
    assert isinstance(answer, Fetched)
    assert answer.text == "greeting: hello\n"
    assert answer.format == "yaml"
    assert answer.revision == git("rev-parse", "HEAD", cwd=repo.work)
    assert source.capability is WatchCapability.CONDITIONAL


def test_revision_is_the_full_commit_and_describe_shows_twelve_hex(repo, make_source):
    commit = repo.commit({"app.yaml": "v: 2\n"})
    source = make_source(repo.http_url)
    assert source.describe().endswith("branch main:app.yaml")
    assert source.fetch().revision == commit
    assert source.describe() == f"git {repo.http_url}@{commit[:12]}:app.yaml"


def test_git_daemon_and_local_path_read_the_same_document(repo, make_source):
    for endpoint in (repo.daemon_url, str(repo.path), f"file://{repo.path}"):
        assert make_source(endpoint).fetch().text == "greeting: hello\n"


def test_missing_file_is_absent(repo, make_source):
    assert make_source(repo.http_url, "nowhere/config.json").fetch() is ABSENT


def test_nested_path_and_format_setting(repo, make_source):
    repo.commit({"billing/prod": '{"port": 9000}'})
    answer = make_source(repo.http_url, "billing/prod", extra={"format": "json"}).fetch()
    assert answer.text == '{"port": 9000}'
    assert answer.format == "json"


def test_branch_tag_and_commit_refs(repo, make_source):
    first = repo.commit({"app.yaml": "v: tagged\n"}, tag="v1.4")
    repo.commit({"app.yaml": "v: release\n"}, branch="release")
    repo.commit({"app.yaml": "v: main\n"})
    assert make_source(repo.http_url, ref="main").fetch().text == "v: main\n"
    assert make_source(repo.http_url, ref="branch:release").fetch().text == "v: release\n"
    tagged = make_source(repo.http_url, ref="tag:v1.4").fetch()
    assert tagged.text == "v: tagged\n"
    assert tagged.revision == first  # an annotated tag is peeled to its commit
    pinned = make_source(repo.http_url, ref=f"commit:{first}")
    assert pinned.fetch().text == "v: tagged\n"


def test_missing_branch_is_a_remote_error_naming_it(repo, make_source):
    with pytest.raises(RemoteError, match="has no branch nope"):
        make_source(repo.http_url, ref="nope").fetch()


def test_unchanged_ref_transfers_nothing(repo, make_source):
    source = make_source(repo.http_url)
    source.fetch()
    source.fetch()
    source.fetch()
    assert source.transfers == 1
    repo.commit({"app.yaml": "v: 3\n"})
    assert source.fetch().text == "v: 3\n"
    assert source.transfers == 2


def test_symlink_inside_the_tree_is_followed(repo, make_source):
    repo.commit(
        {"conf/real.yaml": "a: 1\n"},
        links={"current.yaml": "conf/real.yaml", "conf/up.yaml": "../app.yaml"},
    )
    assert make_source(repo.http_url, "current.yaml").fetch().text == "a: 1\n"
    assert make_source(repo.http_url, "conf/up.yaml").fetch().text == "greeting: hello\n"


@pytest.mark.parametrize("pointee", ["/etc/passwd", "../../etc/passwd", "../outside.yaml"])
def test_symlink_pointing_outside_the_tree_is_refused(repo, make_source, pointee):
    repo.commit({}, links={"evil.yaml": pointee})
    with pytest.raises(RemoteError, match="points outside the repository"):
        make_source(repo.http_url, "evil.yaml").fetch()


def test_symlinked_folder_pointing_outside_is_refused(repo, make_source):
    repo.commit({}, links={"etc": "/etc"})
    with pytest.raises(RemoteError, match="points outside the repository"):
        make_source(
            repo.http_url,
            "etc/passwd.yaml",
        ).fetch()


def test_folder_key_oversized_and_non_utf8_files_are_refused(repo, make_source):
    repo.commit({"dir/inner.yaml": "a: 1\n", "big.yaml": "x" * 5000})
    with pytest.raises(RemoteError, match="names a folder"):
        make_source(repo.http_url, "dir", extra={"format": "yaml"}).fetch()
    with pytest.raises(RemoteError, match="over the 2048-byte ceiling"):
        make_source(repo.http_url, "big.yaml", extra={"max_bytes": "2048"}).fetch()
    (repo.work / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    repo.commit({})
    with pytest.raises(RemoteError, match="not UTF-8"):
        make_source(repo.http_url, "latin1.yaml").fetch()


def test_cache_is_private_shallow_and_holds_no_credential(repo, git_server, make_source, tmp_path):
    repo.commit({"app.yaml": "v: 2\n"})
    source = make_source(repo.auth_url, auth="token", token=git_server.password,
                         auth_username=git_server.user)  # fmt: skip
    source.fetch()
    [clone] = list((tmp_path / "cache").iterdir())
    assert stat.S_IMODE(os.stat(clone).st_mode) == 0o700
    assert (clone / "repo.git" / "shallow").is_file()
    for dirpath, _dirs, files in os.walk(clone):
        for name in files:
            data = (clone / dirpath / name).read_bytes()
            assert git_server.password.encode() not in data, name
    assert "127.0.0.1" not in clone.name  # the directory name is a hash


def test_unreachable_host_is_a_prompt_remote_error(make_source):
    import time

    started = time.monotonic()
    with pytest.raises(RemoteError, match="ls-remote"):
        make_source("http://127.0.0.1:1/nothing.git", timeout=5.0).fetch()
    assert time.monotonic() - started < 5


def test_cache_that_cannot_be_written_is_an_io_error_naming_the_fix(repo, make_source, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the cache's parent directory should be\n")
    source = make_source(repo.http_url, extra={"cache_dir": str(blocker / "cache")})
    with pytest.raises(IoError, match=r"cannot be written .* set the cache_dir setting"):
        source.fetch()


def test_state_dir_holds_the_cache_when_no_cache_dir_is_set(repo, tmp_path):
    from dynconf.stores import StoreSpec
    from dynconf_store_git.plugin import GIT_STORE

    state = tmp_path / ".app.yaml.store"
    spec = StoreSpec(source="git", endpoint=repo.http_url, key="app.yaml", state_dir=str(state))
    source = GIT_STORE.build(spec)
    assert source.fetch().text == "greeting: hello\n"
    [clone] = (state / "git").iterdir()
    assert (clone / "repo.git" / "HEAD").is_file()
