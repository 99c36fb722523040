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
    BlueprintExtension,
    BlueprintFactory,
    Route,
    current,
    missing,
    reply_to_async,
)
from dynconf.integrations._common import request_snapshot as snapshot

try:
    from quart import Blueprint, Quart, Response, g, request
except ImportError as absent:  # the extra is not installed
    raise missing("Quart", "quart", absent) from None

__all__ = ["Dynconf", "blueprint", "current", "snapshot"]


def _view(route: Route) -> Any:
    async def view(path: str = "") -> Response:
        reply = await reply_to_async(route, path, request.headers.items(), request.args.to_dict())
        return Response(reply.body, status=reply.status, content_type=reply.content_type)

    return view


blueprint = BlueprintFactory(Blueprint, __name__, _view)
"""``blueprint(lifecycle, *, name="dynconf", prefix="", metrics=True, stale_after=None,
guard=None)``: the health, metrics and (guarded) diagnostics views, as a blueprint."""


class Dynconf(BlueprintExtension[Quart]):
    """The extension: a lifecycle on the server's life, the request snapshot, the routes."""

    def init_app(self, app: Quart) -> None:
        self._register(app, blueprint, self._open, self._close)
        app.before_serving(self.lifecycle.start_async)
        app.after_serving(self.lifecycle.stop_async)

    async def _open(self) -> None:
        self._open_on(g)

    async def _close(self, _error: BaseException | None = None) -> None:
        self._close_on(g)
