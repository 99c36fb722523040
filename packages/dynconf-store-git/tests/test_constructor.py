"""``Git(url, key, ...)``: the typed constructor against the real git servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dynconf import DynamicConfig
from dynconf_store_git import Git
from tests.fixtures.eventually import eventually

pytestmark = pytest.mark.git


def test_git_constructor_loads_and_the_watch_sees_a_push(repo: Any, tmp_path: Path) -> None:
    repo.commit({"app.json": '{"app": {"v": 1}}'})
    source = Git(repo.http_url, "app.json", extra={"cache_dir": str(tmp_path / "cache")})
    config = DynamicConfig(None, "app").remote(source)
    assert config.init()["v"] == 1
    watch = config.watch_remote(interval=0.5)
    try:
        repo.commit({"app.json": '{"app": {"v": 2}}'})
        assert eventually(lambda: config.current()["v"] == 2, timeout=20), config.current()["v"]
    finally:
        watch.stop()
        watch.join(15)
        source.close()


def test_git_token_callable_is_asked_at_each_fetch(
    repo: Any, git_server: Any, tmp_path: Path
) -> None:
    asked: list[int] = []

    def token() -> str:
        asked.append(1)
        return str(git_server.password)

    source = Git(
        repo.auth_url,
        "app.yaml",
        auth="token",
        token=token,
        auth_username=git_server.user,
        extra={"cache_dir": str(tmp_path / "cache")},
    )
    config = DynamicConfig(None, "").remote(source)
    assert config.init()["greeting"] == "hello"
    first = len(asked)
    repo.commit({"app.yaml": "greeting: again\n"})
    config.refresh_remote()
    assert config.reload()["greeting"] == "again"
    assert first >= 1 and len(asked) > first
    source.close()
