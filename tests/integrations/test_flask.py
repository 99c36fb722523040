"""Flask under werkzeug's threaded WSGI server: the extension follows an edit, one request
one generation, and ``init_app`` on a second app shares the watcher."""

from __future__ import annotations

import os
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
    wait_until,
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


def test_flask_worker_forked_after_init_app_rearms_its_watcher_on_first_request(
    tmp_path: Path,
) -> None:
    """gunicorn ``--preload``: the app (and the load) happen in the master, then it forks."""
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("flask", config_file)
    app: Flask = example.create_app()
    try:
        child = os.fork()
        if child == 0:  # the worker: no watcher thread survived the fork
            code = 1
            try:
                watching_before = example.config.watching_now
                client = app.test_client()
                assert client.get("/").json == {"greeting": "hello", "generation": 1}
                assert example.config.watching_now and not watching_before
                write_greeting(config_file, "bonjour")
                wait_until(lambda: client.get("/").json["greeting"] == "bonjour")
                assert client.get("/").json["generation"] == 2  # re-armed, not reloaded
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        example.dynconf.stop()
