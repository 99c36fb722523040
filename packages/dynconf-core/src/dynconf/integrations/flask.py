"""Flask: an extension with ``init_app``, a per-request snapshot on ``g``, a blueprint.

    dynconf = Dynconf(config)          # or Dynconf(config, app=app)
    def create_app():
        app = Flask(__name__)
        dynconf.init_app(app)          # loads now (a bad file fails app creation), follows
        return app

    @app.get("/")
    def index():
        settings = snapshot().one()    # or g.dynconf, or current(config)

WSGI has no lifespan: ``init_app`` starts the lifecycle, :meth:`Dynconf.stop` (also run at
interpreter exit) stops it. A process forked after ``init_app`` (gunicorn ``--preload``)
re-arms its own watcher on its first request, without reloading. Nothing is copied into
``app.config``: values copied there would be frozen at the moment of the copy.
"""

from __future__ import annotations

import atexit
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
    from flask import Blueprint, Flask, Response, g, request
except ImportError as absent:  # the extra is not installed
    raise missing("Flask", "flask", absent) from None

__all__ = ["Dynconf", "blueprint", "current", "snapshot"]

EXTENSION = "dynconf"


def snapshot() -> RequestSnapshot:
    """The snapshot this request began with (the same object as ``g.dynconf``)."""
    return request_snapshot()


def _view(route: Route) -> Any:
    def view(path: str = "") -> Response:
        reply = route.handle(
            path,
            {key.lower(): value for key, value in request.headers.items()},
            request.args.to_dict(),
        )
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
    """The extension: a lifecycle, the request snapshot and the health blueprint."""

    def __init__(
        self,
        target: Target | Lifecycle,
        *more: Target,
        app: Flask | None = None,
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

    def init_app(self, app: Flask) -> None:
        """Register on ``app`` and start the lifecycle (idempotent across apps)."""
        app.extensions[EXTENSION] = self
        app.before_request(self._open)
        app.teardown_request(self._close)
        if self._routes:
            app.register_blueprint(blueprint(self.lifecycle, **self._route_options))
        self.lifecycle.start()
        atexit.register(self.lifecycle.stop)

    def stop(self) -> None:
        """Stop following (the last app using a configuration stops its watcher)."""
        self.lifecycle.stop()
        atexit.unregister(self.lifecycle.stop)

    def _open(self) -> None:
        taken = self.lifecycle.snapshot()
        g.dynconf = taken
        g._dynconf_token = enter(taken)

    def _close(self, _error: BaseException | None = None) -> None:
        token = g.pop("_dynconf_token", None)
        if token is not None:
            leave(token)
