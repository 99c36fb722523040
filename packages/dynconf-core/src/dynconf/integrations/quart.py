"""Quart: the Flask extension's async twin, started and stopped with the server.

    dynconf = Dynconf(config, app=app)

    @app.get("/")
    async def index():
        settings = snapshot().one()    # or g.dynconf, or current(config)

``before_serving`` starts the lifecycle off the loop, ``after_serving`` stops it; each
request opens its snapshot in ``before_request`` and closes it in ``teardown_request``.
"""

from __future__ import annotations

from typing import Any

from dynconf.integrations._common import (
    Guard,
    Lifecycle,
    RequestSnapshot,
    Route,
    Target,
    current,
    enter,
    leave,
    lifecycle_of,
    missing,
    request_snapshot,
)
from dynconf.integrations._common import routes as route_table
from dynconf.watch import DEFAULT_DEBOUNCE

try:
    import anyio.to_thread
    from quart import Blueprint, Quart, Response, g, request
except ImportError as absent:  # the extra is not installed
    raise missing("Quart", "quart", absent) from None

__all__ = ["Dynconf", "blueprint", "current", "snapshot"]

EXTENSION = "dynconf"


def snapshot() -> RequestSnapshot:
    """The snapshot this request began with (the same object as ``g.dynconf``)."""
    return request_snapshot()


def _view(route: Route) -> Any:
    async def view(path: str = "") -> Response:
        arguments = (
            path,
            {key.lower(): value for key, value in request.headers.items()},
            request.args.to_dict(),
        )
        if route.blocking:
            reply = await anyio.to_thread.run_sync(route.handle, *arguments)
        else:
            reply = route.handle(*arguments)
        return Response(reply.body, status=reply.status, content_type=reply.content_type)

    view.__name__ = route.name.replace("-", "_")
    return view


def blueprint(
    lifecycle: Lifecycle,
    *,
    name: str = "dynconf",
    prefix: str = "",
    metrics: bool = True,
    stale_after: float | None = None,
    guard: Guard | None = None,
) -> Blueprint:
    """The health, metrics and (guarded) diagnostics views, as a blueprint."""
    routes = Blueprint(name, __name__)
    table = route_table(
        lifecycle, prefix=prefix, metrics=metrics, stale_after=stale_after, guard=guard
    )
    for route in table:
        routes.add_url_rule(route.path.replace("{path}", "<path:path>"), view_func=_view(route))
    return routes


class Dynconf:
    """The extension: a lifecycle on the server's life, the request snapshot, the routes."""

    def __init__(
        self,
        target: Target | Lifecycle,
        *more: Target,
        app: Quart | None = None,
        watch: bool = True,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        remote_interval: float = 15.0,
        mount_routes: bool = True,
        prefix: str = "",
        metrics: bool = True,
        stale_after: float | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.lifecycle = lifecycle_of(
            target,
            *more,
            watch=watch,
            debounce=debounce,
            poll_interval=poll_interval,
            remote_interval=remote_interval,
        )
        self._routes = mount_routes
        self._route_options: dict[str, Any] = {
            "prefix": prefix,
            "metrics": metrics,
            "stale_after": stale_after,
            "guard": guard,
        }
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Quart) -> None:
        app.extensions[EXTENSION] = self
        app.before_serving(self.lifecycle.start_async)
        app.after_serving(self.lifecycle.stop_async)
        app.before_request(self._open)
        app.teardown_request(self._close)
        if self._routes:
            app.register_blueprint(blueprint(self.lifecycle, **self._route_options))

    async def _open(self) -> None:
        taken = self.lifecycle.snapshot()
        g.dynconf = taken
        g._dynconf_token = enter(taken)

    async def _close(self, _error: BaseException | None = None) -> None:
        token = g.pop("_dynconf_token", None)
        if token is not None:
            leave(token)
