"""@dynamic_config and Configured: the configuration declared on the model class."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pydantic import BaseModel

from dynconf.declare import Configured, dynamic_config


def test_decorated_class_reads_through_its_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "app.toml").write_text('[db]\nhost = "db"\nport = 5432\n')
    monkeypatch.setenv("DECL_DB_PORT", "6543")

    @dynamic_config(key="db", files=[tmp_path / "app.toml"], env="DECL_")
    class Database(Configured, BaseModel):
        host: str
        port: int

    assert Database.try_current() is None  # nothing is read at decoration time
    Database.config.init()
    assert (Database.current().host, Database.current().port) == ("db", 6543)
    assert "DECL_DB_PORT" in str(Database.source_of("port"))
    (tmp_path / "app.toml").write_text('[db]\nhost = "db2"\nport = 1\n')
    assert Database.reload().host == "db2"


def test_the_decorator_alone_attaches_the_readers_to_a_dataclass(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("[a]\nport = 1\n")

    @dynamic_config(key="a", files=[tmp_path / "a.toml"])
    @dataclasses.dataclass
    class A:
        port: int

    A.config.init()  # type: ignore[attr-defined]
    assert A.current().port == 1  # type: ignore[attr-defined]


def test_a_field_named_like_a_reader_is_refused() -> None:
    with pytest.raises(TypeError, match="declares the field current"):

        @dynamic_config(key="x")
        class X(BaseModel):
            current: int = 0


def test_configured_without_the_decorator_says_what_is_missing() -> None:
    class Bare(Configured, BaseModel):
        port: int = 0

    with pytest.raises(TypeError, match="no @dynamic_config"):
        Bare.current()
