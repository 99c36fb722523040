"""Litestar under a real uvicorn: the plugin follows an edit, one request one generation."""

from __future__ import annotations

from pathlib import Path

from litestar import get as litestar_get

from dynconf.integrations import current
from tests.integrations._support import (
    assert_one_generation,
    get,
    greeting_becomes,
    load_example,
    reload_during,
    serve_asgi,
    write_greeting,
)


def test_litestar_example_serves_a_live_edit(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("litestar", config_file)
    with serve_asgi(example.app) as base:
        assert get(base).json() == {"greeting": "hello", "generation": 1}
        assert get(base, "/readyz").json()["generations"] == {"app": 1}
        write_greeting(config_file, "bonjour")
        assert greeting_becomes(base, "bonjour")["generation"] == 2
        assert get(base, "/readyz").json()["status"] == "ok"


def test_litestar_request_sees_one_generation_across_a_reload(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("litestar", config_file)

    @litestar_get("/during", sync_to_thread=True)
    def during() -> dict[str, object]:
        return reload_during(
            lambda: current(example.config).greeting, example.config, config_file, "bonjour"
        )

    example.app.register(during)
    with serve_asgi(example.app) as base:
        assert_one_generation(get(base, "/during").json(), "hello", "bonjour")
