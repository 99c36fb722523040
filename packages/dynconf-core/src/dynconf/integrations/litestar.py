"""Litestar: one ``InitPlugin`` wires the lifespan, the snapshot, dependencies and routes.

    plugin = DynconfPlugin(config)
    app = Litestar(route_handlers=[index], plugins=[plugin])

    @get("/")
    async def index(settings: Settings) -> dict[str, str]:   # Provide'd by key
        ...

The plugin appends a lifespan (init + follow, then stop), the snapshot middleware, a
``dynconf`` dependency (the :class:`RequestSnapshot`) and one dependency per configuration
named after its key, and the health, metrics and guarded diagnostics handlers.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Unpack

from dynconf.config import DynamicConfig
from dynconf.integrations._asgi import ScopeMiddleware, lifespan
from dynconf.integrations._common import (
    Lifecycle,
    Options,
    RequestSnapshot,
    Route,
    RouteOptions,
    Target,
    current,
    missing,
    reply_to_async,
    request_snapshot,
    wire,
)
from dynconf.integrations._common import routes as route_table

try:
    from litestar import Litestar, Request, Response, get
    from litestar.config.app import AppConfig
    from litestar.di import Provide
    from litestar.handlers import HTTPRouteHandler
    from litestar.middleware import DefineMiddleware
    from litestar.plugins import InitPluginProtocol
except ImportError as absent:  # the extra is not installed
    raise missing("Litestar", "litestar", absent) from None

__all__ = ["DynconfPlugin", "provide_config", "request_snapshot", "route_handlers"]


def provide_config(config: DynamicConfig[Any]) -> Provide:
    """A dependency yielding ``config``'s model as the request began."""

    def dependency() -> Any:
        return current(config)

    return Provide(dependency, sync_to_thread=False)


def _provide_snapshot() -> RequestSnapshot:
    return request_snapshot()


def _handler(route: Route) -> HTTPRouteHandler:
    async def endpoint(request: Request[Any, Any, Any]) -> Response[str]:
        reply = await reply_to_async(
            route,
            str(request.path_params.get("path", "")).lstrip("/"),
            request.headers.items(),
            dict(request.query_params),
        )
        return Response(reply.body, status_code=reply.status, media_type=reply.content_type)

    path = route.path.replace("{path}", "{path:path}")
    return get(path, name=f"dynconf-{route.name}", include_in_schema=False)(endpoint)


def route_handlers(lifecycle: Lifecycle, **options: Unpack[RouteOptions]) -> list[HTTPRouteHandler]:
    """The health, metrics and (guarded) diagnostics handlers."""
    return [_handler(route) for route in route_table(lifecycle, **options)]


class DynconfPlugin(InitPluginProtocol):
    """Wires configurations, groups or a built :class:`Lifecycle` into a Litestar app."""

    def __init__(
        self, target: Target | Lifecycle, *more: Target, **options: Unpack[Options]
    ) -> None:
        self.lifecycle, route_options = wire(target, more, options)
        self._routes = (
            [] if route_options is None else route_handlers(self.lifecycle, **route_options)
        )

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        lifecycle = self.lifecycle

        @contextlib.asynccontextmanager
        async def dynconf_lifespan(_app: Litestar) -> AsyncIterator[None]:
            async with lifespan(lifecycle):
                yield

        app_config.lifespan = [dynconf_lifespan, *app_config.lifespan]
        app_config.middleware = [
            DefineMiddleware(ScopeMiddleware, lifecycle=lifecycle),  # type: ignore[arg-type]
            *app_config.middleware,
        ]
        app_config.dependencies["dynconf"] = Provide(_provide_snapshot, sync_to_thread=False)
        for config in lifecycle.configs:
            app_config.dependencies.setdefault(config.key, provide_config(config))
        app_config.route_handlers = [*app_config.route_handlers, *self._routes]
        return app_config
