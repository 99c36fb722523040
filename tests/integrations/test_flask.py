"""Flask under werkzeug's threaded WSGI server: the extension follows an edit, one request
one generation, and ``init_app`` on a second app shares the watcher."""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from dynconf.integrations.flask import snapshot
from tests.integrations._support import (
    assert_one_generation,
    get,
    greeting_becomes,
    load_example,
    reload_during,
    serve_wsgi,
    write_greeting,
)


def test_flask_example_serves_a_live_edit(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("flask", config_file)
    app = example.create_app()
    try:
        with serve_wsgi(app) as base:
            assert get(base).json() == {"greeting": "hello", "generation": 1}
            write_greeting(config_file, "bonjour")
            assert greeting_becomes(base, "bonjour")["generation"] == 2
            ready = get(base, "/readyz")
            assert ready.status_code == 200 and ready.json()["generations"] == {"app": 2}
    finally:
        example.dynconf.stop()
    assert not example.config.watching_now


def test_flask_request_sees_one_generation_across_a_reload(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("flask", config_file)
    app: Flask = example.create_app()

    @app.get("/during")
    def during() -> dict[str, object]:
        return reload_during(
            lambda: snapshot().one().greeting, example.config, config_file, "bonjour"
        )

    try:
        with serve_wsgi(app) as base:
            assert_one_generation(get(base, "/during").json(), "hello", "bonjour")
    finally:
        example.dynconf.stop()
