"""FastAPI under a real uvicorn: the example follows an edit, one request one generation."""

from __future__ import annotations

from pathlib import Path

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


def test_fastapi_example_serves_a_live_edit(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("fastapi", config_file)
    with serve_asgi(example.app) as base:
        assert get(base).json() == {"greeting": "hello", "limit": 10, "generation": 1}
        ready = get(base, "/readyz")
        assert ready.status_code == 200
        assert ready.json()["generations"] == {"app": 1}
        write_greeting(config_file, "bonjour", limit=20)
        assert greeting_becomes(base, "bonjour") == {
            "greeting": "bonjour",
            "limit": 20,
            "generation": 2,
        }
        assert get(base, "/readyz").json()["configs"]["app"]["last_reason"] == "file-changed"
    assert not example.config.watching_now


def test_fastapi_request_sees_one_generation_across_a_reload(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("fastapi", config_file)

    @example.app.get("/during")
    def during() -> dict[str, object]:
        return reload_during(
            lambda: current(example.config).greeting, example.config, config_file, "bonjour"
        )

    with serve_asgi(example.app) as base:
        assert_one_generation(get(base, "/during").json(), "hello", "bonjour")
        assert get(base).json()["greeting"] == "bonjour"
