"""Starlette under a real uvicorn; also the shared pieces every adapter serves (readiness
when reloads fail, the guarded diagnostics, one watcher for two apps)."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dynconf.integrations import current, token_guard
from dynconf.integrations.starlette import setup
from tests.integrations._support import (
    assert_one_generation,
    get,
    greeting_becomes,
    load_example,
    reload_during_async,
    serve_asgi,
    wait_until,
    write_greeting,
)


def test_starlette_example_serves_a_live_edit(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("starlette", config_file)
    with serve_asgi(example.app) as base:
        assert get(base).json() == {"greeting": "hello", "generation": 1}
        write_greeting(config_file, "bonjour")
        assert greeting_becomes(base, "bonjour")["generation"] == 2
        assert get(base, "/readyz").json()["generations"] == {"app": 2}


def test_starlette_request_sees_one_generation_across_a_reload(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("starlette", config_file)

    async def during(_request: Request) -> JSONResponse:
        answer = await reload_during_async(
            lambda: current(example.config).greeting, example.config, config_file, "bonjour"
        )
        return JSONResponse(answer)

    example.app.router.routes.append(Route("/during", during))
    with serve_asgi(example.app) as base:
        assert_one_generation(get(base, "/during").json(), "hello", "bonjour")


def test_readyz_answers_503_with_the_refusal_while_serving_the_last_good(
    tmp_path: Path,
) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("starlette", config_file)
    with serve_asgi(example.app) as base:
        config_file.write_text('[app]\ngreeting = "hello"\nlimit = "many"\n')
        wait_until(lambda: get(base, "/readyz").status_code == 503)
        body = get(base, "/readyz").json()
        assert body["status"] == "degraded"
        entry = body["configs"]["app"]
        assert entry["generation"] == 1 and entry["consecutive_failures"] >= 1
        assert entry["last_failure"]["path"] == "limit"
        assert "many" not in get(base, "/readyz").text  # no value in the report
        assert get(base).json()["greeting"] == "hello"  # the last good still serves
        assert get(base, "/healthz").status_code == 200  # liveness never fails on config


def test_diagnostics_are_absent_without_a_guard_and_refused_without_its_token(
    tmp_path: Path,
) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("starlette", config_file)
    assert get_unstarted_paths(example.app) >= {"/healthz", "/readyz", "/metrics"}
    assert not any("_config" in path for path in get_unstarted_paths(example.app))

    guarded = Starlette()
    setup(guarded, example.config, guard=token_guard(lambda: "s3cret"))
    with serve_asgi(guarded) as base:
        assert get(base, "/_config/check").status_code == 404
        wrong = {"Authorization": "Bearer nope"}
        assert get(base, "/_config/explain/greeting", headers=wrong).status_code == 404
        right = {"Authorization": "Bearer s3cret"}
        check = get(base, "/_config/check", headers=right)
        assert check.status_code == 200 and "greeting" in check.text
        explain = get(base, "/_config/explain/greeting", headers=right)
        assert explain.status_code == 200 and "config.toml" in explain.text
        metrics = get(base, "/metrics")
        assert 'dynamic_config_generation{config="app"} 1.0' in metrics.text


def get_unstarted_paths(app: Starlette) -> set[str]:
    return {getattr(route, "path", "") for route in app.router.routes}


def test_two_apps_on_one_configuration_share_one_watcher(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    write_greeting(config_file, "hello")
    example = load_example("starlette", config_file)
    second = Starlette(routes=list(example.app.router.routes[:1]))
    setup(second, example.config)
    with serve_asgi(example.app) as first_base, serve_asgi(second) as second_base:
        assert example.config.watching_now
        write_greeting(config_file, "bonjour")
        greeting_becomes(first_base, "bonjour")
        greeting_becomes(second_base, "bonjour")
        assert example.config.generation == 2  # one watcher: one reload per edit
    assert not example.config.watching_now
