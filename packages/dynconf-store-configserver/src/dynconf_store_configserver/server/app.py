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
from collections.abc import AsyncIterator
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from dynconf.plugins import Registry
from dynconf.tracing import Span, Tracing
from dynconf_store_configserver.names import is_name
from dynconf_store_configserver.server.auth import Authenticator, Principal, bearer_of
from dynconf_store_configserver.server.sections import Documents, Section
from dynconf_store_configserver.server.settings import Settings

__all__ = ["create_app"]

audit = logging.getLogger("dynconf.server.audit")

_JSON: Final = "application/json"
NOT_FOUND: Final = b'{"error":"not_found"}'
UNAUTHENTICATED: Final = b'{"error":"unauthenticated"}'
UNAVAILABLE: Final = b'{"error":"unavailable"}'
_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


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


def create_app(settings: Settings, *, registry: Registry | None = None,
               tracing: Tracing | None = None) -> Starlette:  # fmt: skip
    """The server for ``settings``; its lifespan loads the sections and starts their watches.

    ``registry`` supplies store types and formats (the process registry when None);
    ``tracing`` is the process's (no tracing when None), shut down by its owner.
    """
    tracer = tracing or Tracing()
    documents = Documents(settings, registry, tracing=tracer)
    authenticator = Authenticator(settings)
    metrics = _Metrics()
    closing = asyncio.Event()
    streams = {"open": 0}
    per_caller: Tally[str] = Tally()
    scraper = (
        hashlib.sha256(settings.metrics_token.encode()).digest()
        if settings.metrics_token is not None
        else None
    )
    sections_collector = CollectorRegistry()
    sections_collector.register(_SectionCollector(list(documents.sections.values())))

    def record(  # noqa: PLR0917 - one call shape for every audit line
        request: Request, caller: str, endpoint: str, outcome: str, status: int,
        started: float, section: Section | None = None, names: tuple[str, str] | None = None,
    ) -> None:  # fmt: skip
        metrics.requests.labels(endpoint, outcome).inc()
        metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
        span: Span | None = getattr(request.state, "span", None)
        if span is not None:
            span.set(caller=caller, endpoint=endpoint, outcome=outcome, status=status,
                     application=names[0] if names else None,
                     profile=names[1] if names else None,
                     generation=section.generation if section else None)  # fmt: skip
        audit.info(
            "request",
            extra={"caller": caller, "application": names[0] if names else "-",
                   "profile": names[1] if names else "-", "endpoint": endpoint,
                   "outcome": outcome, "status": status,
                   "generation": section.generation if section else "-"},
        )  # fmt: skip

    async def handle(request: Request) -> Response:
        # probes are not traced: a kubelet's every-few-seconds check would drown the requests
        if request.method == "GET" and request.url.path in ("/healthz", "/readyz"):
            return await answer(request)
        with tracer.span("request", method=request.method) as span:
            request.state.span = span
            return await answer(request)

    async def answer(request: Request) -> Response:
        started = time.perf_counter()
        path = request.url.path
        method = request.method
        if method == "GET" and path == "/healthz":
            return _response(200, b'{"status":"ok"}')
        if method == "GET" and path == "/readyz":
            ready = all(s.document is not None for s in documents.sections.values())
            stale = sum(1 for s in documents.sections.values() if s.stale)
            body = f'{{"ready":{"true" if ready else "false"},"stale_sections":{stale}}}'
            return _response(200 if ready else 503, body.encode())
        header = request.headers.get("authorization")
        if method == "GET" and path == "/metrics" and _is_scraper(header):
            record(request, "metrics-scraper", "metrics", "served", 200, started)
            return _metrics_response()
        principal = await authenticator.authenticate(header)
        if principal is None:
            record(request, "-", "unknown", "unauthenticated", 401, started)
            return _response(401, UNAUTHENTICATED, {"WWW-Authenticate": "Bearer"})
        if method != "GET":
            record(request, principal.name, "unknown", "not-found", 404, started)
            return _not_found()
        if path == "/metrics":  # a tenant's credential: metrics are the scraper's
            record(request, principal.name, "metrics", "not-found", 404, started)
            return _not_found()
        parts = path.strip("/").split("/")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "stream"):
            record(request, principal.name, "unknown", "not-found", 404, started)
            return _not_found()
        endpoint = "stream" if len(parts) == 3 else "document"
        application, profile = parts[0], parts[1]
        if not is_name(application) or not is_name(profile):
            record(request, principal.name, endpoint, "malformed", 404, started)
            return _not_found()
        names = (application, profile)
        # The grant first, then the map: a caller learns nothing about sections it cannot read.
        section = documents.sections.get(names) if application in principal.applications else None
        if section is None:
            record(request, principal.name, endpoint, "not-found", 404, started, names=names)
            return _not_found()
        if section.document is None:
            record(request, principal.name, endpoint, "unavailable", 503, started, section, names)
            return _response(503, UNAVAILABLE, {"Retry-After": "5"})
        if endpoint == "stream":
            return _stream(request, principal, section, started, names)
        headers = {"ETag": section.etag, "Cache-Control": "no-cache"}
        if section.stale:
            headers["Dynconf-Stale"] = "true"
        if _matches(request.headers.get("if-none-match"), section.etag):
            record(request, principal.name, endpoint, "not-modified", 304, started, section, names)
            return Response(status_code=304, headers=headers)
        record(request, principal.name, endpoint, "served", 200, started, section, names)
        return _response(200, section.body, headers)

    def _is_scraper(header: str | None) -> bool:
        token = bearer_of(header)
        if scraper is None or token is None:
            return False
        return hmac.compare_digest(hashlib.sha256(token.encode()).digest(), scraper)

    def _metrics_response() -> Response:
        body = generate_latest(metrics.registry) + generate_latest(sections_collector)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    def _stream(request: Request, principal: Principal, section: Section, started: float,
                names: tuple[str, str]) -> Response:  # fmt: skip
        # the span ends when the stream opens (as the latency metric does), not when it closes
        if (
            streams["open"] >= settings.max_stream_connections
            or per_caller[principal.name] >= settings.max_streams_per_client
        ):
            record(request, principal.name, "stream", "unavailable", 503, started, section, names)
            return _response(503, UNAVAILABLE, {"Retry-After": "5"})
        record(request, principal.name, "stream", "subscribed", 200, started, section, names)
        resume = request.headers.get("last-event-id")
        return StreamingResponse(
            _events(section, resume, principal.name),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _events(section: Section, resume: str | None, caller: str) -> AsyncIterator[bytes]:
        streams["open"] += 1
        per_caller[caller] += 1
        metrics.subscribers.inc()
        try:
            # Opening event: where the section stands, unless the client already has it.
            # Compared by inequality, not order: a restarted server counts from 1 again.
            sent = section.generation if resume == str(section.generation) else None
            while not closing.is_set():
                changed = section.changed
                if section.generation != sent:
                    sent = section.generation
                    yield _event(section)
                    continue
                with contextlib.suppress(TimeoutError):
                    waiter = asyncio.ensure_future(changed.wait())
                    closer = asyncio.ensure_future(closing.wait())
                    try:
                        done, _ = await asyncio.wait(
                            {waiter, closer}, timeout=settings.keepalive_seconds,
                            return_when=asyncio.FIRST_COMPLETED,
                        )  # fmt: skip
                    finally:
                        waiter.cancel()
                        closer.cancel()
                    if not done:
                        yield b": keep-alive\n\n"
        finally:
            streams["open"] -= 1
            per_caller[caller] -= 1
            if per_caller[caller] <= 0:
                del per_caller[caller]
            metrics.subscribers.dec()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await documents.start()
        try:
            yield
        finally:
            closing.set()
            await documents.stop()

    app = Starlette(
        routes=[Route("/{path:path}", handle, methods=_METHODS)],
        lifespan=lifespan,
    )
    app.state.documents = documents
    app.state.authenticator = authenticator
    app.state.closing = closing
    app.state.streams = streams
    app.state.streams_by_caller = per_caller
    return app


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
