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
    BlueprintExtension,
    BlueprintFactory,
    Route,
    current,
    missing,
    reply_to,
)
from dynconf.integrations._common import request_snapshot as snapshot

try:
    from flask import Blueprint, Flask, Response, g, request
except ImportError as absent:  # the extra is not installed
    raise missing("Flask", "flask", absent) from None

__all__ = ["Dynconf", "blueprint", "current", "snapshot"]


def _view(route: Route) -> Any:
    def view(path: str = "") -> Response:
        reply = reply_to(route, path, request.headers.items(), request.args.to_dict())
        return Response(reply.body, status=reply.status, content_type=reply.content_type)

    return view


blueprint = BlueprintFactory(Blueprint, __name__, _view)
"""``blueprint(lifecycle, *, name="dynconf", prefix="", metrics=True, stale_after=None,
guard=None)``: the health, metrics and (guarded) diagnostics views, as a blueprint."""


class Dynconf(BlueprintExtension[Flask]):
    """The extension: a lifecycle, the request snapshot and the health blueprint."""

    def init_app(self, app: Flask) -> None:
        """Register on ``app`` and start the lifecycle (idempotent across apps)."""
        self._register(app, blueprint, self._open, self._close)
        self.lifecycle.start()
        atexit.register(self.lifecycle.stop)

    def stop(self) -> None:
        """Stop following (the last app using a configuration stops its watcher)."""
        self.lifecycle.stop()
        atexit.unregister(self.lifecycle.stop)

    def _open(self) -> None:
        self._open_on(g)

    def _close(self, _error: BaseException | None = None) -> None:
        self._close_on(g)
