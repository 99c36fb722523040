"""The node agent's metrics port: two gauges for the whole node, and the probes.

``dynamic_config_node_agent_documents`` counts the documents being watched and
``dynamic_config_node_agent_readers`` the volumes reading them; when the two are equal nothing
is being shared and a sidecar per pod would have cost the same. The port is plain HTTP
(``DYNAMIC_CONFIG_METRICS_ADDR``): ``/healthz`` answers while the process lives, ``/readyz``
once the CSI socket is serving, and every other request gets the exposition — the contract's
"answers every request with the gauges".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import anyio
import anyio.abc
from anyio.abc import SocketStream, TaskStatus
from prometheus_client import CollectorRegistry, Gauge, generate_latest

__all__ = ["DOCUMENTS", "READERS", "NodeMetrics", "serve_metrics"]

DOCUMENTS: Final = "dynamic_config_node_agent_documents"
READERS: Final = "dynamic_config_node_agent_readers"
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
_READ_LIMIT: Final = 1024
_READ_DEADLINE: Final = 5.0

log = logging.getLogger("dynconf_k8s.node")


class NodeMetrics:
    """The two gauges, read from the live registry at every scrape (never stale)."""

    def __init__(
        self,
        documents: Callable[[], float],
        readers: Callable[[], float],
        ready: Callable[[], bool],
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        Gauge(DOCUMENTS, "Documents the node agent watches.", registry=self.registry).set_function(
            documents
        )
        Gauge(READERS, "Pod volumes reading those documents.", registry=self.registry).set_function(
            readers
        )
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
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port)

    async def one(stream: SocketStream) -> None:
        async with stream:
            received = b""
            with anyio.move_on_after(_READ_DEADLINE):
                while b"\r\n" not in received and len(received) < _READ_LIMIT:
                    try:
                        received += await stream.receive(_READ_LIMIT)
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
            parts = received.split(b"\r\n", 1)[0].split()
            path = parts[1].decode("ascii", "replace").split("?", 1)[0] if len(parts) > 1 else "/"
            status, body = metrics.answer(path)
            reason = {200: "OK", 503: "Service Unavailable"}[status]
            head = (
                f"HTTP/1.1 {status} {reason}\r\ncontent-type: {CONTENT_TYPE}\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            )
            try:
                await stream.send(head.encode("ascii") + body)
            except (anyio.BrokenResourceError, OSError):
                return

    async with listener:
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
        log.info("metrics_serving", extra={"address": f"{host}:{bound}"})
        task_status.started(bound)
        await listener.serve(one)
