"""The admission server: a starlette app built from settings, served by uvicorn over TLS.

``create_app(settings)`` needs no process, so tests drive it in memory; :func:`serve` runs
it on the admission listener (TLS, reloaded from disk) and, when configured, a plain
metrics listener. One audit line per non-skipped admission, never an annotation value; and,
when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, one ``admission`` span per review
(:mod:`dynconf.tracing`) carrying the decision, the refusal reason, the namespace and the pod's
name — never an annotation, whose values are the workload's configuration request.

The installation is read from an :class:`~dynconf_k8s.inforce.InstallationInForce` once per
review, so a live reload (the document on disk, or the ``DynamicConfigInstallation``) swaps it
between reviews and never during one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

import uvicorn
import yaml
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from dynconf.logs import RequestLog
from dynconf.tracing import Span, Tracing
from dynconf_k8s.inforce import InstallationInForce, LiveSource, ResourceWatch, live_source
from dynconf_k8s.webhook.admission import decide
from dynconf_k8s.webhook.classes import ClassMap, ClassPoller
from dynconf_k8s.webhook.metrics import WebhookMetrics
from dynconf_k8s.webhook.rotation import SelfRotation
from dynconf_k8s.webhook.settings import WebhookSettings
from dynconf_k8s.webhook.tls import ServingTls

__all__ = ["NoTlsMaterial", "create_app", "create_metrics_app", "serve"]

log = logging.getLogger("dynconf_k8s.webhook")
_RESPONSE: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""The AdmissionReview answer's encoder, built once (``json.dumps`` builds one per call)."""
audit = RequestLog(log)
"""The admission line, written without a log record (one per admission)."""


class NoTlsMaterial(RuntimeError):
    """No serving pair and no plaintext opt-in: an admission webhook cannot serve plain HTTP."""


def _ready(settings: WebhookSettings, tls: ServingTls | None) -> bool:
    return settings.plaintext or (tls is not None and tls.loaded)


def _probes(
    settings: WebhookSettings,
    metrics: WebhookMetrics,
    tls: ServingTls | None,
    synced: threading.Event | None = None,
    draining: threading.Event | None = None,
) -> list[Route]:
    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_: Request) -> Response:
        if draining is not None and draining.is_set():
            return PlainTextResponse("shutting down; still admitting", status_code=503)
        if not _ready(settings, tls):
            return PlainTextResponse("no certificate loaded", status_code=503)
        if synced is not None and not synced.is_set():
            return PlainTextResponse(
                "the installation resource is not in force yet", status_code=503
            )
        return PlainTextResponse("ok")

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
    tracing: Tracing | None = None,
    installation: InstallationInForce | None = None,
    synced: threading.Event | None = None,
    draining: threading.Event | None = None,
) -> Starlette:
    """The admission app: ``POST /mutate`` plus probes and metrics, and ``POST /explain``
    when ``settings.explain`` is on.

    ``tracing`` is the process's (one span per admission); the caller owns its shutdown.
    ``installation`` is the live holder (default: ``settings.installation``, fixed);
    ``synced``, when given, holds ``/readyz`` at 503 until it is set (the resource was read);
    ``draining``, once set, turns ``/readyz`` to 503 while admission goes on (shutdown).
    """
    metrics = metrics or WebhookMetrics()
    in_force = installation or InstallationInForce(settings.installation)
    metrics.installation.follow(in_force)
    tracer = tracing or Tracing()

    async def mutate(request: Request) -> Response:
        with tracer.span("admission") as span:
            try:
                review: Any = json.loads(await request.body())
                if not isinstance(review, dict):
                    raise TypeError
            except (ValueError, TypeError):
                span.set(outcome="bad-request")
                body = json.dumps(decide(None, in_force.current).response, separators=(",", ":"))
                return Response(body, status_code=400, media_type="application/json")
            return _admit(review, span)

    def _admit(review: dict[str, Any], span: Span) -> Response:
        started = time.perf_counter()
        decision = decide(review, in_force.current, classes() if classes else None)
        span.set(
            outcome=decision.outcome,
            reason=decision.reason,
            namespace=decision.namespace or None,
            pod=decision.pod or None,
            patch_bytes=decision.patch_bytes,
            warnings=len(decision.warnings),
        )
        metrics.observe(
            decision.outcome, decision.reason, time.perf_counter() - started, decision.patch_bytes
        )
        if decision.outcome != "skipped":
            audit.info(
                "admission",
                {
                    "namespace": decision.namespace,
                    "pod": decision.pod,
                    "source": decision.source,
                    "outcome": decision.outcome,
                    "reason": decision.reason,
                },
            )
        body = _RESPONSE.encode(decision.response)
        return Response(body, media_type="application/json")

    routes = [
        Route("/mutate", mutate, methods=["POST"]),
        *_probes(settings, metrics, tls, synced, draining),
    ]
    if settings.explain:
        routes.append(Route("/explain", _explain_endpoint(in_force, classes), methods=["POST"]))
    app = Starlette(routes=routes)
    app.state.metrics = metrics
    return app


EXPLAIN_BODY_LIMIT = 1 << 20
"""The largest pod ``/explain`` reads (a pod object is far smaller; the API server's own
request limit is 3 MiB)."""


def _explain_endpoint(
    in_force: InstallationInForce, classes: Callable[[], ClassMap] | None
) -> Callable[[Request], Any]:
    """``POST /explain``: a Pod (JSON or YAML) in, :func:`explain_pod`'s report out.

    Judged with the installation and the class map this process admits with, in the
    namespace ``?namespace=`` names (else the pod's own). It is not an admission: it is not
    counted, and its one log line names the pod and the outcome, never a value.
    """
    from dynconf_k8s.webhook.explain import explain_pod

    def refuse(problem: str) -> Response:
        body = json.dumps({"error": problem + "; POST a Pod object, as JSON or YAML"})
        return Response(body, status_code=400, media_type="application/json")

    async def endpoint(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > EXPLAIN_BODY_LIMIT:
            return refuse(f"the body is larger than {EXPLAIN_BODY_LIMIT} bytes")
        try:
            pod: Any = yaml.safe_load(raw)
        except yaml.YAMLError:
            return refuse("the body is neither JSON nor YAML")
        if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
            return refuse("the body is not a Pod")
        report = explain_pod(
            pod,
            in_force.current,
            namespace=request.query_params.get("namespace") or None,
            classes=classes() if classes else None,
        )
        log.info(
            "explain",
            extra={"namespace": report["namespace"], "pod": report["pod"],
                   "outcome": report["outcome"]},
        )  # fmt: skip
        return Response(json.dumps(report, ensure_ascii=False), media_type="application/json")

    return endpoint


def create_metrics_app(
    settings: WebhookSettings,
    metrics: WebhookMetrics,
    tls: ServingTls | None = None,
    synced: threading.Event | None = None,
    draining: threading.Event | None = None,
) -> Starlette:
    """The plain-HTTP listener: metrics and probes only, never admission."""
    return Starlette(routes=_probes(settings, metrics, tls, synced, draining))


class _Server(uvicorn.Server):
    """A uvicorn server whose signals the process handles once, for both listeners."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _reload_loop(tls: ServingTls, metrics: WebhookMetrics, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        if tls.reload() and tls.not_after is not None:
            metrics.expires_at.set(tls.not_after)


def live_installation(
    settings: WebhookSettings,
) -> tuple[InstallationInForce, LiveSource | None]:
    """The holder admission reads, and the source that replaces it live (if any)."""
    # Following a resource, the generation in force is the resource's: none (0) until read.
    holder = InstallationInForce(
        settings.installation,
        settings.environ,
        origin=settings.document,
        generation=0 if settings.installation_resource else 1,
    )
    source = live_source(
        holder,
        component="webhook",
        identity=settings.identity,
        resource=settings.installation_resource,
        clients=settings.kube.api_client,
        document=settings.document,
        every=settings.reload_seconds,
    )
    return holder, source


def _start_background(
    settings: WebhookSettings,
    metrics: WebhookMetrics,
    stop: threading.Event,
    source: LiveSource | None = None,
) -> tuple[ClassPoller | None, list[threading.Thread], Callable[[], None]]:
    """The class poller, the rotation loop and the installation's live source, each on its
    own thread (the kube client blocks)."""
    threads: list[threading.Thread] = []
    wakers: list[Callable[[], None]] = []
    poller = None
    if source is not None:
        threads.append(threading.Thread(target=source.run, args=(stop,), name="installation"))
    if settings.classes:
        poller = ClassPoller(settings.kube, settings.classes_poll_seconds)
        threads.append(threading.Thread(target=poller.run, args=(stop,), name="classes"))
    if settings.self_rotate is not None:
        rotation = SelfRotation(settings.self_rotate, settings.kube, metrics)
        threads.append(threading.Thread(target=rotation.run, args=(stop,), name="rotation"))
        wakers.append(rotation.stop_waiting)
    for thread in threads:
        thread.daemon = True
        thread.start()

    def wake() -> None:
        for waker in wakers:
            waker()

    return poller, threads, wake


async def _await_pair(tls: ServingTls, every: float, stopping: asyncio.Event) -> bool:
    """selfRotate: wait until the Secret's pair is mounted and parses (False if told to stop)."""
    while not tls.loaded:
        log.info("waiting for the serving pair", extra={"cert": tls.cert})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), every)
        if stopping.is_set():
            return False
        tls.reload()
    return True


async def serve(settings: WebhookSettings, tracing: Tracing | None = None) -> None:
    """Serve until SIGTERM/SIGINT, go on admitting for ``settings.linger_seconds``, then
    drain for up to ``settings.drain_seconds``.

    The linger is for the API server: a deleted replica stays in the Service's endpoints for a
    moment after its SIGTERM, and an admission sent to a closed port is answered by
    ``failurePolicy`` (``Ignore``: the pod starts without its agent). ``/readyz`` says 503
    meanwhile, so the endpoint is withdrawn while the port still answers. A second signal ends
    the linger at once.

    With selfRotate the pair may not exist yet (the leader is about to mint it), so serving
    waits for it instead of refusing to start. ``tracing`` is the caller's to shut down.
    """
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    draining = threading.Event()
    servers: list[_Server] = []

    def exit_servers() -> None:
        for server in servers:
            server.should_exit = True

    def stop() -> None:
        if draining.is_set():
            exit_servers()  # asked twice: no more lingering
            return
        log.info("draining", extra={"linger_seconds": settings.linger_seconds})
        draining.set()
        stopping.set()
        loop.call_later(settings.linger_seconds, exit_servers)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    tls: ServingTls | None = None
    if not settings.plaintext:
        tls = ServingTls(settings.tls_cert, settings.tls_key)
        if not tls.loaded and settings.self_rotate is None:
            raise NoTlsMaterial(
                f"no TLS material at {settings.tls_cert} / {settings.tls_key}: an admission "
                "webhook cannot serve plain HTTP (set DYNAMIC_CONFIG_WEBHOOK_PLAINTEXT=1 only "
                "for a local harness)"
            )
    metrics = WebhookMetrics()
    halt = threading.Event()
    holder, source = live_installation(settings)
    poller, threads, wake = _start_background(settings, metrics, halt, source)
    try:
        if tls is not None and not await _await_pair(tls, settings.tls_wait_seconds, stopping):
            return
        if tls is not None and tls.not_after is not None:
            metrics.expires_at.set(tls.not_after)
        await _serve_listeners(
            settings, metrics, tls, poller, servers, tracing=tracing, installation=holder,
            synced=source.synced if isinstance(source, ResourceWatch) else None,
            draining=draining,
        )  # fmt: skip
    finally:
        halt.set()
        wake()
        for thread in threads:
            thread.join(timeout=settings.drain_seconds)


async def _serve_listeners(
    settings: WebhookSettings,
    metrics: WebhookMetrics,
    tls: ServingTls | None,
    poller: ClassPoller | None,
    servers: list[_Server],
    *,
    tracing: Tracing | None = None,
    installation: InstallationInForce | None = None,
    synced: threading.Event | None = None,
    draining: threading.Event | None = None,
) -> None:
    app = create_app(
        settings,
        metrics=metrics,
        tls=tls,
        classes=poller.classes if poller else None,
        tracing=tracing,
        installation=installation,
        synced=synced,
        draining=draining,
    )
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
    servers.append(_Server(config))
    metrics_addr = settings.metrics_host_port
    if metrics_addr:
        mconfig = uvicorn.Config(
            create_metrics_app(settings, metrics, tls, synced, draining),
            host=metrics_addr[0],
            port=metrics_addr[1],
            log_config=None,
            access_log=False,
        )
        servers.append(_Server(mconfig))
    reloader = (
        asyncio.create_task(_reload_loop(tls, metrics, settings.tls_reload_seconds))
        if tls
        else None
    )
    log.info(
        "webhook serving", extra={"addr": settings.addr, "metrics_addr": settings.metrics_addr}
    )
    try:
        await asyncio.gather(*(server.serve() for server in servers))
    finally:
        if reloader:
            reloader.cancel()
