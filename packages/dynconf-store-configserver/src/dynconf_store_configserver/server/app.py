"""The config server's HTTP surface: a starlette app built by :func:`create_app`.

Routes (GET only; anything else is the one 404):

* ``/{application}/{profile}`` - ``{application, profile, generation, config}``, with an
  ETag (``If-None-Match`` → 304) and ``Dynconf-Stale: true`` while a store is failing;
* ``/{application}/{profile}/stream`` - server-sent events of generation numbers;
* ``/metrics`` - Prometheus text for every section, answered only to the scraper's own
  bearer (``server.metrics_token``); a tenant's credential gets the one 404, so no tenant
  reads another's counters;
* ``/healthz``, ``/readyz`` - no credential.

Change streams are capped twice: ``server.max_stream_connections`` for the process and
``server.max_streams_per_client`` for each caller, so one credential holding every slot
cannot deny the others (both answer 503 with ``Retry-After: 5``).

A missing or refused credential is 401. Everything else that is not served - a section the
caller may not read, a section that does not exist, a malformed name, an unknown route or
method - is the same 404, byte for byte, and the grant is checked before the section map is
consulted, so a caller cannot learn which sections exist. One audit line per request names
the caller, route and outcome, never a value; with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, one
``request`` span (:mod:`dynconf.tracing`) carries the same fields — never a header, a token or
the document.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import time
from collections import Counter as Tally
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dynconf.logs import RequestLog
from dynconf.metrics import StoreRequestsCollector
from dynconf.plugins import Registry
from dynconf.tracing import Span, Tracing
from dynconf_store_configserver.names import is_name
from dynconf_store_configserver.server.auth import Authenticator, Principal, bearer_of
from dynconf_store_configserver.server.sections import Documents, Section
from dynconf_store_configserver.server.settings import Settings

__all__ = ["create_app"]

audit = RequestLog(logging.getLogger("dynconf.server.audit"))

_JSON: Final = "application/json"
NOT_FOUND: Final = b'{"error":"not_found"}'
UNAUTHENTICATED: Final = b'{"error":"unauthenticated"}'
UNAVAILABLE: Final = b'{"error":"unavailable"}'
_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
Handler = Callable[[Request], Awaitable[Response]]
Found = tuple[Principal, "Section", tuple[str, str]]
"""Who asked, the section they may read, and its (application, profile)."""
_JSON_HEADER: Final = (b"content-type", b"application/json")
_NO_CACHE: Final = (b"cache-control", b"no-cache")
_STALE: Final = (b"dynconf-stale", b"true")


class _Metrics:
    """Process-level series in the app's own registry (so several apps can share a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "dynconf_server_requests", "Requests by endpoint and outcome.",
            ["endpoint", "outcome"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "dynconf_server_request_seconds", "Time to answer a request (streams: to open).",
            ["endpoint"], registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
        )  # fmt: skip
        self.subscribers = Gauge(
            "dynconf_server_stream_subscribers", "Open change streams.", registry=self.registry
        )
        self.registry.register(StoreRequestsCollector("dynconf_server"))


class _SectionCollector:
    """Per-section series of the sections given (every section, for the scraper)."""

    def __init__(self, sections: list[Section]) -> None:
        self._sections = sections

    def collect(self) -> Any:
        labels = ["application", "profile"]
        families = {
            "generation": GaugeMetricFamily("dynconf_server_section_generation",
                                            "Installed generation.", labels=labels),
            "stale": GaugeMetricFamily("dynconf_server_section_stale",
                                       "1 while a store or a file of the section is failing.",
                                       labels=labels),
            "built": GaugeMetricFamily("dynconf_server_section_built_timestamp_seconds",
                                       "When the installed document was built.", labels=labels),
            "failures": GaugeMetricFamily("dynconf_server_section_store_failures",
                                          "Store failures seen since start.", labels=labels),
        }  # fmt: skip
        for section in self._sections:
            values = [section.settings.application, section.settings.profile]
            families["generation"].add_metric(values, section.generation)
            families["stale"].add_metric(values, 1.0 if section.stale else 0.0)
            families["built"].add_metric(values, section.built_at)
            families["failures"].add_metric(values, sum(f.failures for f in section.feeds))
        yield from families.values()


def _response(status: int, body: bytes, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type=_JSON, headers=headers)


def _not_found() -> Response:
    return _response(404, NOT_FOUND)


def _unauthenticated() -> Response:
    return _response(401, UNAUTHENTICATED, {"WWW-Authenticate": "Bearer"})


class _Server:
    """The state one app serves from, and one method per route of :func:`create_app`'s table."""

    def __init__(self, settings: Settings, registry: Registry | None, tracing: Tracing) -> None:
        self.settings = settings
        self.tracer = tracing
        self.documents = Documents(settings, registry, tracing=tracing)
        self.authenticator = Authenticator(settings)
        self.metrics = _Metrics()
        self.closing = asyncio.Event()
        self.streams = {"open": 0}
        self.per_caller: Tally[str] = Tally()
        self.scraper = (
            hashlib.sha256(settings.metrics_token.encode()).digest()
            if settings.metrics_token is not None
            else None
        )
        self.sections_collector = CollectorRegistry()
        self.sections_collector.register(_SectionCollector(list(self.documents.sections.values())))
        self._counted: dict[tuple[str, str], Any] = {}
        self._timed: dict[str, Any] = {}

    def record(  # noqa: PLR0917 - one call shape for every audit line
        self, span: Span | None, caller: str, endpoint: str, outcome: str, status: int,
        started: float, section: Section | None = None, names: tuple[str, str] | None = None,
    ) -> None:  # fmt: skip
        counted = self._counted.get((endpoint, outcome))
        if counted is None:  # a labelled child is looked up once, not on every request
            counted = self._counted[endpoint, outcome] = self.metrics.requests.labels(
                endpoint, outcome
            )
        counted.inc()
        timed = self._timed.get(endpoint)
        if timed is None:
            timed = self._timed[endpoint] = self.metrics.latency.labels(endpoint)
        timed.observe(time.perf_counter() - started)
        if span is not None:
            span.set(caller=caller, endpoint=endpoint, outcome=outcome, status=status,
                     application=names[0] if names else None,
                     profile=names[1] if names else None,
                     generation=section.generation if section else None)  # fmt: skip
        audit.info(
            "request",
            {"caller": caller, "application": names[0] if names else "-",
             "profile": names[1] if names else "-", "endpoint": endpoint,
             "outcome": outcome, "status": status,
             "generation": section.generation if section else "-"},
        )  # fmt: skip

    # ------------------------------------------------------------------ routes
    async def healthz(self, request: Request) -> Response:
        if request.method != "GET":
            return await self.not_served(request)
        return _response(200, b'{"status":"ok"}')

    async def readyz(self, request: Request) -> Response:
        if request.method != "GET":
            return await self.not_served(request)
        sections = self.documents.sections.values()
        ready = all(s.document is not None for s in sections)
        stale = sum(1 for s in sections if s.stale)
        body = f'{{"ready":{"true" if ready else "false"},"stale_sections":{stale}}}'
        return _response(200 if ready else 503, body.encode())

    async def metrics_page(self, request: Request) -> Response:
        """The scraper's own bearer; any other caller gets what an unknown route gets."""
        started = time.perf_counter()
        if request.method != "GET" or not self._is_scraper(request.headers.get("authorization")):
            principal = await self._requester(request, started)
            if principal is None:
                return _unauthenticated()
            endpoint = "metrics" if request.method == "GET" else "unknown"
            self.record(_span(request), principal.name, endpoint, "not-found", 404, started)
            return _not_found()
        self.record(_span(request), "metrics-scraper", "metrics", "served", 200, started)
        body = generate_latest(self.metrics.registry) + generate_latest(self.sections_collector)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def stream(self, request: Request) -> Response:
        started = time.perf_counter()
        span = _span(request)
        found = await self._section(
            request.method, request.headers.get("authorization"),
            request.path_params["application"], request.path_params["profile"], "stream",
            started, span,
        )  # fmt: skip
        if isinstance(found, Response):
            return found
        principal, section, names = found
        return self._open_stream(request, principal, section, started, names)

    async def document(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``GET /{application}/{profile}``, answered in plain ASGI: the one route a fleet of
        clients polls, so it skips the router and the request object (see :class:`_Front`)."""
        started = time.perf_counter()
        application, profile = scope["path"][1:].split("/")
        authorization = if_none_match = None
        for name, value in scope["headers"]:  # the first of a repeated header, as starlette
            if name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif name == b"if-none-match" and if_none_match is None:
                if_none_match = value.decode("latin-1")
        with self.tracer.span("request", method=scope["method"]) as span:
            found = await self._section(
                scope["method"], authorization, application, profile, "document", started, span
            )
            if isinstance(found, Response):
                await found(scope, receive, send)
                return
            principal, section, names = found
            headers = [(b"etag", section.etag.encode()), _NO_CACHE]
            if section.stale:
                headers.append(_STALE)
            if _matches(if_none_match, section.etag):
                self.record(span, principal.name, "document", "not-modified", 304, started,
                            section, names)  # fmt: skip
                await send({"type": "http.response.start", "status": 304, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
            self.record(span, principal.name, "document", "served", 200, started, section, names)
            body = section.body
            headers += [(b"content-length", str(len(body)).encode()), _JSON_HEADER]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})

    async def not_served(self, request: Request) -> Response:
        """Every other route or method: 401 without a credential, else the one 404."""
        started = time.perf_counter()
        principal = await self._requester(request, started)
        if principal is None:
            return _unauthenticated()
        self.record(_span(request), principal.name, "unknown", "not-found", 404, started)
        return _not_found()

    # ------------------------------------------------------------------ sections
    async def _requester(self, request: Request, started: float) -> Principal | None:
        return await self._principal(request.headers.get("authorization"), started, _span(request))

    async def _principal(self, authorization: str | None, started: float,
                         span: Span | None) -> Principal | None:  # fmt: skip
        principal = await self.authenticator.authenticate(authorization)
        if principal is None:
            self.record(span, "-", "unknown", "unauthenticated", 401, started)
        return principal

    async def _section(  # noqa: PLR0917 - the request's facts, from either front
        self, method: str, authorization: str | None, application: str, profile: str,
        endpoint: str, started: float, span: Span | None,
    ) -> Response | Found:  # fmt: skip
        """The section this request may read, or the refusal to send instead."""
        principal = await self._principal(authorization, started, span)
        if principal is None:
            return _unauthenticated()
        if method != "GET":
            self.record(span, principal.name, "unknown", "not-found", 404, started)
            return _not_found()
        if not is_name(application) or not is_name(profile):
            self.record(span, principal.name, endpoint, "malformed", 404, started)
            return _not_found()
        names = (application, profile)
        # The grant first, then the map: a caller learns nothing about sections it cannot read.
        sections = self.documents.sections
        section = sections.get(names) if application in principal.applications else None
        if section is None:
            self.record(span, principal.name, endpoint, "not-found", 404, started, names=names)
            return _not_found()
        if section.document is None:
            self.record(span, principal.name, endpoint, "unavailable", 503, started, section,
                        names)  # fmt: skip
            return _response(503, UNAVAILABLE, {"Retry-After": "5"})
        return principal, section, names

    def _is_scraper(self, header: str | None) -> bool:
        token = bearer_of(header)
        if self.scraper is None or token is None:
            return False
        return hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.scraper)

    # ------------------------------------------------------------------ streams
    def _open_stream(self, request: Request, principal: Principal, section: Section,
                     started: float, names: tuple[str, str]) -> Response:  # fmt: skip
        # the span ends when the stream opens (as the latency metric does), not when it closes
        span = _span(request)
        if (
            self.streams["open"] >= self.settings.max_stream_connections
            or self.per_caller[principal.name] >= self.settings.max_streams_per_client
        ):
            self.record(span, principal.name, "stream", "unavailable", 503, started, section,
                        names)  # fmt: skip
            return _response(503, UNAVAILABLE, {"Retry-After": "5"})
        self.record(span, principal.name, "stream", "subscribed", 200, started, section, names)
        resume = request.headers.get("last-event-id")
        return StreamingResponse(
            self._events(section, resume, principal.name),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _events(self, section: Section, resume: str | None,
                      caller: str) -> AsyncIterator[bytes]:  # fmt: skip
        self.streams["open"] += 1
        self.per_caller[caller] += 1
        self.metrics.subscribers.inc()
        try:
            # Opening event: where the section stands, unless the client already has it.
            # Compared by inequality, not order: a restarted server counts from 1 again.
            sent = section.generation if resume == str(section.generation) else None
            while not self.closing.is_set():
                changed = section.changed
                if section.generation != sent:
                    sent = section.generation
                    yield _event(section)
                    continue
                # One future per stream on the section's event and no task of its own: a
                # change to a section 10,000 streams follow wakes each stream once.
                # close_streams sets the event too, so closing needs no second waiter.
                try:
                    async with asyncio.timeout(self.settings.keepalive_seconds):
                        await changed.wait()
                except TimeoutError:
                    yield b": keep-alive\n\n"
        finally:
            self.streams["open"] -= 1
            self.per_caller[caller] -= 1
            if self.per_caller[caller] <= 0:
                del self.per_caller[caller]
            self.metrics.subscribers.dec()

    def close_streams(self) -> None:
        """End every change stream: mark the server closing and wake each stream's wait."""
        self.closing.set()
        for section in self.documents.sections.values():
            section.changed.set()

    # ------------------------------------------------------------------ lifecycle
    def traced(self, handler: Handler) -> Handler:
        """``handler`` inside one ``request`` span (the probes are routed around this)."""

        async def route(request: Request) -> Response:
            with self.tracer.span("request", method=request.method) as span:
                request.state.span = span
                return await handler(request)

        return route

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.documents.start()
        try:
            yield
        finally:
            self.close_streams()
            await self.documents.stop()


def create_app(settings: Settings, *, registry: Registry | None = None,
               tracing: Tracing | None = None) -> Starlette:  # fmt: skip
    """The server for ``settings``; its lifespan loads the sections and starts their watches.

    ``registry`` supplies store types and formats (the process registry when None);
    ``tracing`` is the process's (no tracing when None), shut down by its owner.

    The route table is the whole surface. Probes are not traced (a kubelet's check every few
    seconds would drown the requests); the last row catches every other path and method, so
    what is not served answers one way. Slashes are never redirected: a redirect would tell
    an unauthenticated caller which shapes are routes.
    """
    server = _Server(settings, registry, tracing or Tracing())
    routes = [
        Route("/healthz", server.healthz, methods=_METHODS),
        Route("/readyz", server.readyz, methods=_METHODS),
        Route("/metrics", server.traced(server.metrics_page), methods=_METHODS),
        Route("/{application}/{profile}/stream", server.traced(server.stream), methods=_METHODS),
        Route("/{path:path}", server.traced(server.not_served), methods=_METHODS),
    ]
    front = Middleware(_Front, server=server)  # /{application}/{profile}, before the routes
    app = Starlette(routes=routes, middleware=[front], lifespan=server.lifespan)
    app.router.redirect_slashes = False
    app.state.documents = server.documents
    app.state.authenticator = server.authenticator
    app.state.closing = server.closing
    app.state.close_streams = server.close_streams
    app.state.streams = server.streams
    app.state.streams_by_caller = server.per_caller
    return app


class _Front:
    """Pure ASGI in front of the router: ``/{application}/{profile}`` (any method) goes
    straight to :meth:`_Server.document`; probes, metrics, streams and the one 404 to the routes.

    The document route is what every client polls, and the router and request objects were
    most of its time (``bench/peers.py``, the config-server rows). Only that route is here, so
    what the routes answer is unchanged.
    """

    def __init__(self, app: ASGIApp, server: _Server) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path") and _is_document(scope["path"]):
            await self.server.document(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _is_document(path: str) -> bool:
    """``/a/b``: two segments, neither empty (what the route ``/{application}/{profile}`` took)."""
    return path.count("/") == 2 and path[0] == "/" and path[1] != "/" and path[-1] != "/"


def _span(request: Request) -> Span | None:
    span: Span | None = getattr(request.state, "span", None)
    return span


def _event(section: Section) -> bytes:
    generation = section.generation
    data = (
        f'{{"application":"{section.settings.application}",'
        f'"profile":"{section.settings.profile}","generation":{generation}}}'
    )
    return f"id: {generation}\nevent: generation\ndata: {data}\n\n".encode()


def _matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    return any(tag.strip() in (etag, "*", f"W/{etag}") for tag in header.split(","))
