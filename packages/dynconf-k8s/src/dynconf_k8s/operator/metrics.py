"""The operator's metrics and probes: a starlette app over a prometheus-client registry.

Series (prefix ``dynamic_config_operator_``): ``renders_total`` (reconciles that left the
target current, written or not), ``render_failures_total`` (class, store or render refusals),
``last_render_timestamp_seconds``, ``reconcile_duration_seconds`` (histogram, 0.01…60 s) and
``reconcile_failures_total`` (every failed reconcile, API refusals included), and with restarts
on, ``restarts_total`` (rollouts started) and ``restart_failures_total`` (rollout patches
refused), and ``store_requests_total{store,endpoint,outcome}`` (every store call, from the
process's :mod:`dynconf.budget` ledger), and with the pod audit on (the default),
``pods_without_agent{pod_namespace}`` (pods that asked for injection and have no agent, now)
and ``pods_without_agent_total{pod_namespace}`` (distinct such pods found). Only the leader
reconciles, so a follower's series stay flat. ``/healthz`` answers while the process lives and
``/readyz`` is always ready: a follower is healthy, and the Render status carries readiness.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

import uvicorn
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from dynconf.metrics import StoreRequestsCollector
from dynconf_k8s.inforce.holder import InstallationMetrics
from dynconf_k8s.metrics_port import CONTENT_TYPE

__all__ = [
    "CONTENT_TYPE",
    "METRICS_ADDR_ENV",
    "PREFIX",
    "MetricsServer",
    "OperatorMetrics",
    "PodsWithoutAgent",
    "metrics_app",
    "parse_addr",
]

PREFIX: Final = "dynamic_config_operator"
METRICS_ADDR_ENV: Final = "DYNAMIC_CONFIG_OPERATOR_METRICS_ADDR"
DEFAULT_ADDR: Final = "0.0.0.0:9090"
RECONCILE_BUCKETS: Final = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0)

log = logging.getLogger("dynconf_k8s.operator.metrics")


class PodsWithoutAgent(Collector):
    """``<prefix>_pods_without_agent`` (gauge) and ``<prefix>_pods_without_agent_total``
    (counter), both by ``pod_namespace``: the pod audit's findings, read at scrape.

    The gauge counts the pods found by the last pass. The counter counts distinct pods found
    since the process started. A namespace keeps its samples, at 0, once its pods are gone, so
    an alert resolves instead of losing its series. The pair shares one name the way the agent's
    ``absent`` / ``absent_total`` do. The text format served here (0.0.4) keeps the two apart,
    but prometheus-client's own metric objects refuse to share a family name, hence a collector.
    The label is ``pod_namespace``, not ``namespace``: a scrape config attaches the operator's
    own ``namespace``, and Prometheus would rename a clashing label to ``exported_namespace``.
    """

    def __init__(self, prefix: str) -> None:
        self._name = f"{prefix}_pods_without_agent"
        self._lock = threading.Lock()
        self._now: dict[str, int] = {}
        self._found: dict[str, int] = {}

    def observe(self, now: Mapping[str, int], found: Iterable[str]) -> None:
        """A pass's result: pods without agent by namespace, and the namespaces of new ones."""
        with self._lock:
            for namespace in found:
                self._found[namespace] = self._found.get(namespace, 0) + 1
            self._now = {namespace: now.get(namespace, 0) for namespace in self._found}

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now, found = dict(self._now), dict(self._found)
        gauge = GaugeMetricFamily(
            self._name,
            "Pods that asked for injection and run without the agent, by namespace.",
            labels=["pod_namespace"],
        )
        counter = CounterMetricFamily(
            self._name,
            "Distinct pods found asking for injection without the agent, by namespace.",
            labels=["pod_namespace"],
        )
        for namespace in sorted(found):
            gauge.add_metric([namespace], now.get(namespace, 0))
            counter.add_metric([namespace], found[namespace])
        yield gauge
        yield counter


class OperatorMetrics:
    """The series the operator moves, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.renders = Counter(
            f"{PREFIX}_renders", "Reconciles that left the target current.", registry=self.registry
        )
        self.render_failures = Counter(
            f"{PREFIX}_render_failures",
            "Renders refused by the class, the target, the store or the document.",
            registry=self.registry,
        )
        self.last_render = Gauge(
            f"{PREFIX}_last_render_timestamp_seconds",
            "Unix time of the last successful render.",
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Seconds one Render's reconcile took.",
            buckets=RECONCILE_BUCKETS,
            registry=self.registry,
        )
        self.reconcile_failures = Counter(
            f"{PREFIX}_reconcile_failures",
            "Reconciles that failed, API refusals included.",
            registry=self.registry,
        )
        self.restarts = Counter(
            f"{PREFIX}_restarts",
            "Rollouts started for workloads annotated restart-on-change.",
            registry=self.registry,
        )
        self.restart_failures = Counter(
            f"{PREFIX}_restart_failures",
            "Rollout patches the API server refused.",
            registry=self.registry,
        )
        self.registry.register(StoreRequestsCollector(PREFIX))
        self.pods_without_agent = PodsWithoutAgent(PREFIX)
        """The pod audit's findings (no samples until its first pass, none with it off)."""
        self.registry.register(self.pods_without_agent)
        self.installation = InstallationMetrics(self.registry, PREFIX)
        """Ours: live installation reloads (the budgets), the generation in force."""

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def metrics_app(metrics: OperatorMetrics) -> Starlette:
    """``/healthz``, ``/readyz`` and the exposition on every other path (as the agent's port)."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok\n", media_type=CONTENT_TYPE)

    async def exposition(_: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", healthz),
            Route("/{path:path}", exposition),
        ]
    )


def parse_addr(value: str) -> tuple[str, int] | None:
    """``host:port`` (``[::]:9090`` for IPv6); empty disables the server."""
    value = value.strip()
    if not value:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{METRICS_ADDR_ENV} must be host:port, e.g. {DEFAULT_ADDR}")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - a pod listens on all


class MetricsServer:
    """uvicorn on a socket bound before the thread starts, so the port is known at once."""

    def __init__(self, metrics: OperatorMetrics, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._socket.listen(128)  # connections queue until uvicorn accepts: no startup race
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn.Config(
            metrics_app(metrics), log_config=None, access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self.host = host

    def start(self) -> None:
        self._thread.start()
        log.info("metrics_serving", extra={"address": f"{self.host}:{self.port}"})

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._socket.close()
