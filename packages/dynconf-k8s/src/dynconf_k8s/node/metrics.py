"""The node agent's metrics port: three gauges for the whole node, and the probes.

``dynamic_config_node_agent_documents`` counts the documents being watched and
``dynamic_config_node_agent_readers`` the volumes reading them; when the two are equal nothing
is being shared and a sidecar per pod would have cost the same.
``dynamic_config_node_agent_staleness_seconds`` is the age of the least recently confirmed
document: seconds since a read or a delivered change last confirmed it (the agent's
``staleness_seconds``, taken over every document of the node; 0 with none). A document whose
store cannot be read keeps its files and ages here, so one alert covers the node.
``dynamic_config_node_agent_store_requests_total{store,endpoint,outcome}`` counts the calls all
those documents made, one budget per store and endpoint (:mod:`dynconf.budget`).
The port is the agent's (:mod:`dynconf_k8s.metrics_port`, ``DYNAMIC_CONFIG_METRICS_ADDR``):
``/healthz`` answers while the process lives, ``/readyz`` once the CSI socket is serving, and
every other request gets the exposition — the contract's "answers every request with the gauges".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import anyio
from anyio.abc import TaskStatus
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from dynconf.metrics import StoreRequestsCollector
from dynconf_k8s.metrics_port import CONTENT_TYPE, serve_port

__all__ = ["CONTENT_TYPE", "DOCUMENTS", "READERS", "STALENESS", "NodeMetrics", "serve_metrics"]

DOCUMENTS: Final = "dynamic_config_node_agent_documents"
READERS: Final = "dynamic_config_node_agent_readers"
STALENESS: Final = "dynamic_config_node_agent_staleness_seconds"

log = logging.getLogger("dynconf_k8s.node")


class NodeMetrics:
    """The gauges, read from the live registry at every scrape (never stale)."""

    def __init__(
        self,
        documents: Callable[[], float],
        readers: Callable[[], float],
        ready: Callable[[], bool],
        staleness: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        Gauge(DOCUMENTS, "Documents the node agent watches.", registry=self.registry).set_function(
            documents
        )
        Gauge(READERS, "Pod volumes reading those documents.", registry=self.registry).set_function(
            readers
        )
        Gauge(
            STALENESS,
            "Seconds since the least recently confirmed document was last read.",
            registry=self.registry,
        ).set_function(lambda: float(int(staleness())))
        self.registry.register(StoreRequestsCollector("dynamic_config_node_agent"))
        self.ready = ready

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def answer(self, path: str) -> tuple[int, bytes]:
        """Status and body for a request path (pure, so tests need no socket)."""
        if path == "/healthz":
            return 200, b"ok\n"
        if path == "/readyz":
            return (200, b"ok\n") if self.ready() else (503, b"not serving yet\n")
        return 200, self.exposition()


async def serve_metrics(
    metrics: NodeMetrics,
    host: str,
    port: int,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the bound port through ``task_status``."""
    await serve_port(
        lambda request: metrics.answer(request.path), host, port, log=log, task_status=task_status
    )
