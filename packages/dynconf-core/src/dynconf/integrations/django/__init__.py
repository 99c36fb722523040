"""Django: an app config that starts the lifecycle, a middleware, health views and urls.

    # settings.py
    INSTALLED_APPS = [..., "dynconf.integrations.django"]
    MIDDLEWARE = [..., "dynconf.integrations.django.DynconfMiddleware"]
    DYNCONF = {"CONFIGS": ["shop.config:config"]}   # "module:attribute", or the objects
    # optional: "WATCH": True, "DEBOUNCE": 0.2, "POLL_INTERVAL": None, "STALE_AFTER": None,
    #           "GUARD": "module:callable" (enables /_config/check and /_config/explain/)

    # urls.py
    urlpatterns = [..., path("", include("dynconf.integrations.django.urls"))]

    # a view
    def index(request):
        settings = request.dynconf.one()       # or current(config)

``AppConfig.ready()`` loads every configuration (a bad file stops ``manage.py`` with the
error) and follows them; :func:`stop` (also run at interpreter exit) stops. A worker forked
after ``ready()`` (gunicorn ``--preload``) re-arms its own watcher on its first request.
"""

from __future__ import annotations

import atexit
import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from dynconf.integrations._common import (
    JSON,
    Lifecycle,
    Route,
    current,
    enter,
    leave,
    missing,
    request_snapshot,
)
from dynconf.integrations._common import routes as route_table

try:
    from asgiref.sync import iscoroutinefunction, markcoroutinefunction
    from django.core.exceptions import ImproperlyConfigured
    from django.http import HttpRequest, HttpResponse
except ImportError as absent:  # the extra is not installed
    raise missing("Django", "django", absent) from None

__all__ = [
    "DynconfMiddleware",
    "configure",
    "current",
    "lifecycle",
    "request_snapshot",
    "start",
    "stop",
]

_INSTALLED: list[tuple[Lifecycle, dict[str, Any]]] = []


def _resolve(value: Any, setting: str) -> Any:
    if not isinstance(value, str):
        return value
    module, _, attribute = value.partition(":")
    if not attribute:
        raise ImproperlyConfigured(
            f"DYNCONF[{setting!r}]: {value!r} is not 'module:attribute'; name the module and "
            "the object in it, e.g. 'shop.config:config'"
        )
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ImproperlyConfigured(
            f"DYNCONF[{setting!r}]: cannot import {value!r} ({type(error).__name__}); "
            "check the module path and the attribute name"
        ) from None


def configure(settings: dict[str, Any]) -> Lifecycle:
    """Build the lifecycle from a ``DYNCONF`` mapping (what ``ready()`` calls)."""
    known = {"CONFIGS", "WATCH", "DEBOUNCE", "POLL_INTERVAL", "STALE_AFTER", "GUARD", "METRICS"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ImproperlyConfigured(
            f"DYNCONF: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    configs = settings.get("CONFIGS")
    if not configs:
        raise ImproperlyConfigured(
            "DYNCONF['CONFIGS'] is empty; list the DynamicConfig or ConfigGroup objects "
            "(or 'module:attribute' paths) the project reads"
        )
    targets = [_resolve(item, "CONFIGS") for item in configs]
    options: dict[str, Any] = {"watch": bool(settings.get("WATCH", True))}
    if "DEBOUNCE" in settings:
        options["debounce"] = float(settings["DEBOUNCE"])
    if settings.get("POLL_INTERVAL") is not None:
        options["poll_interval"] = float(settings["POLL_INTERVAL"])
    made = Lifecycle(*targets, **options)
    route_options = {
        "stale_after": settings.get("STALE_AFTER"),
        "guard": _resolve(settings.get("GUARD"), "GUARD"),
        "metrics": bool(settings.get("METRICS", True)),
    }
    _INSTALLED[:] = [(made, route_options)]
    return made


def lifecycle() -> Lifecycle:
    """The lifecycle ``ready()`` built; raises when the app is not installed."""
    if not _INSTALLED:
        raise ImproperlyConfigured(
            "dynconf is not configured: add 'dynconf.integrations.django' to INSTALLED_APPS "
            "and a DYNCONF = {'CONFIGS': [...]} setting"
        )
    return _INSTALLED[0][0]


def start() -> Lifecycle:
    made = lifecycle()
    made.start()
    atexit.register(made.stop)
    return made


def stop() -> None:
    """Stop following (idempotent)."""
    if _INSTALLED:
        made = _INSTALLED[0][0]
        made.stop()
        atexit.unregister(made.stop)


class DynconfMiddleware:
    """Sets ``request.dynconf`` (the :class:`RequestSnapshot`) and the scope the view reads
    through :func:`current`; sync and async."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self._async:
            return self._acall(request)
        taken = lifecycle().snapshot()
        request.dynconf = taken
        token = enter(taken)
        try:
            return self.get_response(request)
        finally:
            leave(token)

    async def _acall(self, request: HttpRequest) -> Any:
        taken = lifecycle().snapshot()
        request.dynconf = taken
        token = enter(taken)
        try:
            response: Awaitable[Any] = self.get_response(request)
            return await response
        finally:
            leave(token)


def _view(route_name: str) -> Callable[..., HttpResponse]:
    def view(request: HttpRequest, path: str = "") -> HttpResponse:
        made, options = _INSTALLED[0] if _INSTALLED else (lifecycle(), {})
        table: dict[str, Route] = {route.name: route for route in route_table(made, **options)}
        route = table.get(route_name)
        if route is None:
            return HttpResponse(b'{"detail": "not found"}', status=404, content_type=JSON)
        reply = route.handle(
            path,
            {key.lower(): value for key, value in request.headers.items()},
            request.GET.dict(),
        )
        return HttpResponse(reply.body, status=reply.status, content_type=reply.content_type)

    view.__name__ = route_name.replace("-", "_")
    return view


def _urlpatterns() -> list[Any]:
    from django.urls import path as route
    from django.urls import re_path

    return [
        route("healthz", _view("healthz"), name="dynconf-healthz"),
        route("readyz", _view("readyz"), name="dynconf-readyz"),
        route("metrics", _view("metrics"), name="dynconf-metrics"),
        route("_config/check", _view("config-check"), name="dynconf-config-check"),
        re_path(
            r"^_config/explain/(?P<path>.+)$",
            _view("config-explain"),
            name="dynconf-config-explain",
        ),
    ]
