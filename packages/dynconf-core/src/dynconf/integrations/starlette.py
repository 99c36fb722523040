"""Starlette (and any app built on it): lifespan, request snapshot, health routes.

    app = Starlette(routes=[...])
    setup(app, config)            # wraps the app's lifespan, adds the middleware and routes

    async def index(request):
        settings = current(config)  # the model this request began with

``setup`` wraps the lifespan the app already has (init + follow before it, stop after),
adds :class:`~dynconf.integrations._asgi.ScopeMiddleware` and mounts ``/healthz``,
``/readyz``, ``/metrics`` and, with a ``guard``, the diagnostics.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Unpack

from dynconf.integrations._asgi import ScopeMiddleware, lifespan
from dynconf.integrations._common import (
    Lifecycle,
    Options,
    Reply,
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
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute
    from starlette.routing import Route as StarletteRoute
except ImportError as absent:  # the extra is not installed
    raise missing("Starlette", "starlette", absent) from None

__all__ = ["ScopeMiddleware", "current", "lifespan", "request_snapshot", "routes", "setup"]


def _response(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=reply.content_type)


def _endpoint(route: Route) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        reply = await reply_to_async(
            route,
            str(request.path_params.get("path", "")),
            request.headers.items(),
            dict(request.query_params),
        )
        return _response(reply)

    return endpoint


def routes(lifecycle: Lifecycle, **options: Unpack[RouteOptions]) -> list[BaseRoute]:
    """The health, metrics and (guarded) diagnostics routes, as Starlette routes."""
    return [
        StarletteRoute(
            route.path.replace("{path}", "{path:path}"),
            _endpoint(route),
            methods=["GET"],
            name=f"dynconf-{route.name}",
            include_in_schema=False,
        )
        for route in route_table(lifecycle, **options)
    ]


def setup(
    app: Starlette,
    target: Target | Lifecycle,
    *more: Target,
    request_scope: bool = True,
    **options: Unpack[Options],
) -> Lifecycle:
    """Wire ``target`` (configurations, groups, or a built :class:`Lifecycle`) into ``app``.

    Call it before the app starts (Starlette adds middleware only then). Returns the
    lifecycle, whose ``configs`` and ``started`` a test may inspect. The options are
    :class:`~dynconf.integrations._common.Options`: how to follow, which routes to mount.
    """
    lifecycle, route_options = wire(target, more, options)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def combined(application: Any) -> AsyncIterator[Any]:
        async with lifespan(lifecycle), inner(application) as state:
            yield state

    app.router.lifespan_context = combined
    if request_scope:
        app.add_middleware(ScopeMiddleware, lifecycle=lifecycle)
    if route_options is not None:
        app.router.routes.extend(routes(lifecycle, **route_options))
    return lifecycle
