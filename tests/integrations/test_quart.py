"""Quart under a real uvicorn: the extension follows an edit, one request one generation."""

from __future__ import annotations

from pathlib import Path

from quart import g

from dynconf.integrations import current, request_snapshot
from tests.integrations._support import (
    assert_one_generation,
    get,
    greeting_becomes,
    load_example,
    reload_during_async,
    serve_asgi,
    write_greeting,
)


def test_quart_example_serves_a_live_edit(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("quart", config_file)
    with serve_asgi(example.app) as base:
        assert get(base).json() == {"greeting": "hello", "generation": 1}
        write_greeting(config_file, "bonjour")
        assert greeting_becomes(base, "bonjour")["generation"] == 2
        assert get(base, "/readyz").json()["generations"] == {"app": 2}
    assert not example.config.watching_now


def test_quart_request_sees_one_generation_across_a_reload(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("quart", config_file)

    @example.app.get("/during")
    async def during() -> dict[str, object]:
        def read() -> str:  # the ContextVar the handler reads is the snapshot g holds
            assert request_snapshot() is g.dynconf
            return str(current(example.config).greeting)

        return await reload_during_async(read, example.config, config_file, "bonjour")

    with serve_asgi(example.app) as base:
        assert_one_generation(get(base, "/during").json(), "hello", "bonjour")
