"""The admission server: a starlette app built from settings, served by uvicorn over TLS.

``create_app(settings)`` needs no process, so tests drive it in memory; :func:`serve` runs
it on the admission listener (TLS, reloaded from disk) and, when configured, a plain
metrics listener. One audit line per non-skipped admission, never an annotation value.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from dynconf_k8s.webhook.admission import decide
from dynconf_k8s.webhook.classes import ClassMap
from dynconf_k8s.webhook.metrics import WebhookMetrics
from dynconf_k8s.webhook.settings import WebhookSettings
from dynconf_k8s.webhook.tls import ServingTls

__all__ = ["NoTlsMaterial", "create_app", "create_metrics_app", "serve"]

log = logging.getLogger("dynconf_k8s.webhook")


class NoTlsMaterial(RuntimeError):
    """No serving pair and no plaintext opt-in: an admission webhook cannot serve plain HTTP."""


def _ready(settings: WebhookSettings, tls: ServingTls | None) -> bool:
    return settings.plaintext or (tls is not None and tls.loaded)


def _probes(
    settings: WebhookSettings, metrics: WebhookMetrics, tls: ServingTls | None
) -> list[Route]:
    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        if _ready(settings, tls):
            return PlainTextResponse("ok")
        return PlainTextResponse("no certificate loaded", status_code=503)

    async def exposition(_: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", exposition),
    ]


def create_app(
    settings: WebhookSettings,
    *,
    metrics: WebhookMetrics | None = None,
    tls: ServingTls | None = None,
    classes: Callable[[], ClassMap] | None = None,
) -> Starlette:
    """The admission app: ``POST /mutate`` plus probes and metrics."""
    metrics = metrics or WebhookMetrics()
    installation = settings.installation

    async def mutate(request: Request) -> Response:
        try:
            review: Any = json.loads(await request.body())
            if not isinstance(review, dict):
                raise TypeError
        except (ValueError, TypeError):
            return PlainTextResponse("the body is not an AdmissionReview", status_code=400)
        started = time.perf_counter()
        decision = decide(review, installation, classes() if classes else None)
        metrics.observe(
            decision.outcome, decision.reason, time.perf_counter() - started, decision.patch_bytes
        )
        if decision.outcome != "skipped":
            log.info(
                "admission",
                extra={
                    "namespace": decision.namespace,
                    "pod": decision.pod,
                    "source": decision.source,
                    "outcome": decision.outcome,
                    "reason": decision.reason,
                },
            )
        body = json.dumps(decision.response, separators=(",", ":"), ensure_ascii=False)
        return Response(body, media_type="application/json")

    app = Starlette(routes=[Route("/mutate", mutate, methods=["POST"]),
                            *_probes(settings, metrics, tls)])  # fmt: skip
    app.state.metrics = metrics
    return app


def create_metrics_app(
    settings: WebhookSettings, metrics: WebhookMetrics, tls: ServingTls | None = None
) -> Starlette:
    """The plain-HTTP listener: metrics and probes only, never admission."""
    return Starlette(routes=_probes(settings, metrics, tls))


class _Server(uvicorn.Server):
    """A uvicorn server whose signals the process handles once, for both listeners."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _reload_loop(tls: ServingTls, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        tls.reload()


async def serve(settings: WebhookSettings) -> None:
    """Serve until SIGTERM/SIGINT, then drain for up to ``settings.drain_seconds``."""
    tls: ServingTls | None = None
    if not settings.plaintext:
        tls = ServingTls(settings.tls_cert, settings.tls_key)
        if not tls.loaded:
            raise NoTlsMaterial(
                f"no TLS material at {settings.tls_cert} / {settings.tls_key}: an admission "
                "webhook cannot serve plain HTTP (set DYNAMIC_CONFIG_WEBHOOK_PLAINTEXT=1 only "
                "for a local harness)"
            )
    metrics = WebhookMetrics()
    app = create_app(settings, metrics=metrics, tls=tls)
    host, port = settings.host_port
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=settings.drain_seconds,
        timeout_keep_alive=15,
        ssl_context_factory=(lambda _c, _d: tls.context) if tls else None,
        ssl_certfile=settings.tls_cert if tls else None,
    )
    servers = [_Server(config)]
    metrics_addr = settings.metrics_host_port
    if metrics_addr:
        mconfig = uvicorn.Config(
            create_metrics_app(settings, metrics, tls),
            host=metrics_addr[0],
            port=metrics_addr[1],
            log_config=None,
            access_log=False,
        )
        servers.append(_Server(mconfig))
    loop = asyncio.get_running_loop()

    def stop() -> None:
        log.info("draining")
        for server in servers:
            server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    reloader = asyncio.create_task(_reload_loop(tls, settings.tls_reload_seconds)) if tls else None
    log.info(
        "webhook serving", extra={"addr": settings.addr, "metrics_addr": settings.metrics_addr}
    )
    try:
        await asyncio.gather(*(server.serve() for server in servers))
    finally:
        if reloader:
            reloader.cancel()
