"""Last-known-good on disk: the cache file's shape, its mode, and the cold-start recovery."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr

from dynconf.cache import CACHE_MARKER
from dynconf.config import DynamicConfig, ReloadReason
from dynconf.errors import BackendError, InvalidError, ParseError


class Db(BaseModel):
    host: str
    port: int
    password: SecretStr = SecretStr("")


GOOD = '[db]\nhost = "db.internal"\nport = 5432\npassword = "hunter2"\n'


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "app.toml"
    path.write_text(GOOD, encoding="utf-8")
    return path


def build(config_file: Path, cache: Path, mode: str = "redacted") -> DynamicConfig[Db]:
    return DynamicConfig(Db, "db").file(config_file).env("CACHETEST_").cache(cache, mode)


def test_cache_file_is_owner_only_and_replaced_by_rename(config_file: Path, tmp_path: Path) -> None:
    cache = tmp_path / "last-good.json"
    config = build(config_file, cache)
    config.init()
    first = os.stat(cache)
    assert stat.S_IMODE(first.st_mode) == 0o600
    config.reload()
    second = os.stat(cache)
    assert stat.S_IMODE(second.st_mode) == 0o600
    assert second.st_ino != first.st_ino  # a new file renamed over the old, never rewritten
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_redacted_cache_holds_the_section_without_secret_paths(
    config_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "last-good.json"
    build(config_file, cache).init()
    body = json.loads(cache.read_text())
    assert body == {
        "cached": {
            "host": "db.internal",
            "port": 5432,
            CACHE_MARKER: {"version": 1, "mode": "redacted"},
        }
    }


def test_full_cache_keeps_secrets_and_its_format_follows_the_extension(
    config_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "last-good.toml"
    build(config_file, cache, "full").init()
    text = cache.read_text()
    assert "[cached]" in text and 'password = "hunter2"' in text


def test_cold_start_with_broken_sources_recovers_from_the_cache(
    config_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "last-good.json"
    build(config_file, cache, "full").init()
    config_file.write_text("[db\n", encoding="utf-8")
    restarted = build(config_file, cache, "full")
    with caplog.at_level(logging.WARNING, logger="dynconf.engine"):
        db = restarted.init()
    assert (db.host, db.port, db.password.get_secret_value()) == ("db.internal", 5432, "hunter2")
    status = restarted.status()
    assert status.last_reason == ReloadReason.RECOVERED.value
    assert status.consecutive_failures == 1  # still unhealthy: it serves an old document
    assert str(restarted.source_of("port")) == str(restarted.source_of("host"))
    assert "cached configuration" in str(restarted.source_of("port"))
    assert "config_recovered_from_cache" in caplog.messages
    assert "hunter2" not in caplog.text


def test_recovery_keeps_the_environment_above_the_cache(
    config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "last-good.json"
    build(config_file, cache).init()
    config_file.unlink()
    config_file.write_text("[db\n", encoding="utf-8")
    monkeypatch.setenv("CACHETEST_DB_PASSWORD", "from-env")
    monkeypatch.setenv("CACHETEST_DB_PORT", "6543")
    db = build(config_file, cache).init()
    assert (db.port, db.password.get_secret_value()) == (6543, "from-env")


def test_a_failed_reload_neither_reads_nor_writes_the_cache(
    config_file: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "last-good.json"
    config = build(config_file, cache)
    config.init()
    before = cache.read_bytes(), os.stat(cache).st_ino
    config_file.write_text("[db\n", encoding="utf-8")
    with pytest.raises(ParseError):
        config.reload()
    assert (cache.read_bytes(), os.stat(cache).st_ino) == before
    assert config.status().last_reason == ReloadReason.INITIAL.value


def test_cold_start_without_a_cache_file_raises_the_original_error(
    config_file: Path, tmp_path: Path
) -> None:
    config_file.unlink()
    with pytest.raises(InvalidError):
        build(config_file, tmp_path / "never-written.json").init()


def test_fingerprint_cache_holds_no_value_never_recovers_and_reports_drift(
    config_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "fingerprint.json"
    build(config_file, cache, "fingerprint").init()
    body = json.loads(cache.read_text())["cached"]
    assert sorted(body) == [CACHE_MARKER, "fingerprint", "keys"]
    assert body["keys"] == ["host", "password", "port"]
    assert "hunter2" not in cache.read_text() and "db.internal" not in cache.read_text()

    config_file.write_text(GOOD.replace("5432", "6543"), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="dynconf.engine"):
        build(config_file, cache, "fingerprint").init()
    drift = [r for r in caplog.records if r.getMessage() == "config_cache_drift"]
    assert [getattr(r, "drift", None) for r in drift] == ["the same keys, with different values"]

    config_file.write_text("[db\n", encoding="utf-8")
    with pytest.raises(ParseError):
        build(config_file, cache, "fingerprint").init()


def test_unknown_mode_names_the_three(config_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'redacted', 'full', 'fingerprint'"):
        build(config_file, tmp_path / "c.json", "secret")


def test_a_redacted_cache_of_an_untyped_config_needs_the_secret_paths(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="secrets="):
        DynamicConfig(None, "db").cache(tmp_path / "c.json")
    DynamicConfig(None, "db", secrets=["password"]).cache(tmp_path / "c.json")


def test_a_cache_that_cannot_hold_a_typed_document_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="cannot hold a typed document"):
        DynamicConfig(Db, "db").cache(tmp_path / "c.properties")
    with pytest.raises(BackendError, match="age-encrypted"):
        DynamicConfig(Db, "db").cache(tmp_path / "c.age")
