"""Robyn: startup/shutdown handlers, a ``@scoped`` handler wrapper, the health routes.

    app = Robyn(__file__)
    integration = setup(app, config)

    @app.get("/")
    @integration.scoped
    async def index(request):
        settings = current(config)     # the model this request began with

Robyn gives no per-request hook that shares the handler's context, so the snapshot is
opened by wrapping the handler (sync or async) with :meth:`RobynIntegration.scoped`.
Routes are Robyn's own; Robyn runs each worker process's startup handler in that process,
so every process loads and follows for itself.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, Unpack

from dynconf.integrations._common import (
    Lifecycle,
    Options,
    Route,
    Target,
    current,
    enter,
    leave,
    missing,
    request_snapshot,
    wire,
)
from dynconf.integrations._common import routes as route_table

try:
    from robyn import Response, Robyn
except ImportError as absent:  # the extra is not installed
    raise missing("Robyn", "robyn", absent) from None

__all__ = ["RobynIntegration", "current", "request_snapshot", "setup"]

F = TypeVar("F", bound=Callable[..., Any])


def _headers(request: Any) -> dict[str, str]:
    headers = request.headers
    found: dict[str, str] = {}
    for name in ("authorization",):
        value = headers.get(name)
        if value:
            found[name] = value
    return found


def _query(request: Any) -> dict[str, str]:
    params = request.query_params
    return {key: values[-1] for key, values in params.to_dict().items() if values}


class RobynIntegration:
    def __init__(self, app: Robyn, lifecycle: Lifecycle) -> None:
        self.app = app
        self.lifecycle = lifecycle

    def scoped(self, handler: F) -> F:
        """Run ``handler`` inside a request snapshot."""
        lifecycle = self.lifecycle
        if inspect.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def asynchronous(*args: Any, **kwargs: Any) -> Any:
                token = enter(lifecycle.snapshot())
                try:
                    return await handler(*args, **kwargs)
                finally:
                    leave(token)

            return asynchronous  # type: ignore[return-value]

        @functools.wraps(handler)
        def synchronous(*args: Any, **kwargs: Any) -> Any:
            token = enter(lifecycle.snapshot())
            try:
                return handler(*args, **kwargs)
            finally:
                leave(token)

        return synchronous  # type: ignore[return-value]


def _handler(route: Route) -> Callable[..., Any]:
    def handler(request: Any) -> Response:
        path = str(request.path_params.get("path", "")) if request.path_params else ""
        reply = route.handle(path, _headers(request), _query(request))
        return Response(
            status_code=reply.status,
            headers={"Content-Type": reply.content_type},
            description=reply.body,
        )

    handler.__name__ = route.name.replace("-", "_")
    return handler


def setup(
    app: Robyn, target: Target | Lifecycle, *more: Target, **options: Unpack[Options]
) -> RobynIntegration:
    """Start with the server, stop with it, mount the routes; answers the integration.

    The options are :class:`~dynconf.integrations._common.Options`."""
    lifecycle, route_options = wire(target, more, options)
    app.startup_handler(lifecycle.start_async)
    app.shutdown_handler(lifecycle.stop_async)
    if route_options is not None:
        for route in route_table(lifecycle, **route_options):
            app.get(route.path.replace("{path}", ":path"))(_handler(route))
    return RobynIntegration(app, lifecycle)
