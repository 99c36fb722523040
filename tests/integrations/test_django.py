"""The Django example project under a real WSGI server (werkzeug's, threaded, in a thread):
``AppConfig.ready()`` loads and follows, the middleware snapshots each request, the
included urls answer ``readyz``. Django is configured once per process, so one project
(served over WSGI and over ASGI, by uvicorn) serves this module's tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dynconf.integrations import current
from tests.integrations._support import (
    EXAMPLES,
    assert_one_generation,
    environment,
    get,
    greeting_becomes,
    reload_during,
    serve_asgi,
    serve_wsgi,
    write_greeting,
)


@dataclass(frozen=True)
class Project:
    base: str
    asgi_base: str
    config_file: Path
    config: Any


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    config_file = tmp_path_factory.mktemp("django") / "config.toml"
    write_greeting(config_file, "hello")
    sys.path.insert(0, str(EXAMPLES / "django"))
    try:
        with environment(APP_CONFIG=str(config_file), DJANGO_SETTINGS_MODULE="shop.settings"):
            from django.core.wsgi import get_wsgi_application
            from django.http import JsonResponse
            from django.urls import path

            application = get_wsgi_application()  # django.setup(): ready() starts dynconf
            from django.core.asgi import get_asgi_application

            asgi_application = get_asgi_application()  # the middleware, in its async mode
            from shop import urls
            from shop.config import config

            def during(_request: Any) -> JsonResponse:
                return JsonResponse(
                    reload_during(lambda: current(config).greeting, config, config_file, "bonjour")
                )

            urls.urlpatterns.append(path("during", during))
            assert config.watching_now
            try:
                with (
                    serve_wsgi(application) as base,
                    serve_asgi(asgi_application, lifespan="off") as asgi,
                ):
                    yield Project(base, asgi, config_file, config)
            finally:
                from dynconf.integrations import django as integration

                integration.stop()
            assert not config.watching_now
    finally:
        sys.path.remove(str(EXAMPLES / "django"))
        os.environ.pop("DJANGO_SETTINGS_MODULE", None)


def test_django_example_serves_a_live_edit(project: Project) -> None:
    before = get(project.base).json()["generation"]
    write_greeting(project.config_file, "salut")
    assert greeting_becomes(project.base, "salut")["generation"] == before + 1
    ready = get(project.base, "/readyz")
    assert ready.status_code == 200
    assert ready.json()["generations"] == {"app": before + 1}
    assert get(project.base, "/healthz").json() == {"status": "ok"}
    assert get(project.base, "/_config/check").status_code == 404  # no GUARD: not there


def test_django_request_sees_one_generation_across_a_reload(project: Project) -> None:
    write_greeting(project.config_file, "hello")
    greeting_becomes(project.base, "hello")
    assert_one_generation(get(project.base, "/during").json(), "hello", "bonjour")


def test_django_under_asgi_serves_a_live_edit(project: Project) -> None:
    before = get(project.asgi_base).json()["generation"]
    write_greeting(project.config_file, "hallo")
    assert greeting_becomes(project.asgi_base, "hallo")["generation"] == before + 1
    assert get(project.asgi_base, "/readyz").json()["generations"] == {"app": before + 1}


def test_django_under_asgi_request_sees_one_generation_across_a_reload(
    project: Project,
) -> None:
    write_greeting(project.config_file, "hello")
    greeting_becomes(project.asgi_base, "hello")
    assert_one_generation(get(project.asgi_base, "/during").json(), "hello", "bonjour")
