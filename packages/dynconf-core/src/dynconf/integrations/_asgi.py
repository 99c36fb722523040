"""The raw-ASGI pieces the ASGI adapters share (Starlette/FastAPI, Litestar).

A pure ASGI middleware rather than a framework's ``BaseHTTPMiddleware``: the endpoint runs
in the same task (so the ``ContextVar`` set here is the one it reads), a ``def`` endpoint's
threadpool copies that context, and streaming bodies are not buffered.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from dynconf.integrations._common import Lifecycle, enter, leave

__all__ = ["ScopeMiddleware", "lifespan"]

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


class ScopeMiddleware:
    """Opens a request snapshot around every HTTP and websocket request."""

    def __init__(self, app: ASGIApp, lifecycle: Lifecycle) -> None:
        self.app = app
        self.lifecycle = lifecycle

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        snapshot = self.lifecycle.snapshot()
        state = scope.setdefault("state", {})  # request.state.dynconf (Starlette, Litestar)
        if isinstance(state, dict):
            state["dynconf"] = snapshot
        token = enter(snapshot)
        try:
            await self.app(scope, receive, send)
        finally:
            leave(token)


@contextlib.asynccontextmanager
async def lifespan(lifecycle: Lifecycle) -> AsyncIterator[Lifecycle]:
    """Start before the first request, stop after the last: the ASGI lifespan's shape."""
    await lifecycle.start_async()
    try:
        yield lifecycle
    finally:
        await lifecycle.stop_async()
