"""The agent's metrics port: what each path answers (the server is :mod:`..metrics_port`).

``POST /applied`` records the application's acknowledgement (200 current, 409 names the
published fingerprint, 400 for an empty body), ``/healthz`` answers while the process lives,
``/readyz`` says whether a document is rendered (fresh and acknowledged when those are
required), and every other request gets the exposition.
"""

from __future__ import annotations

import logging
from functools import partial

import anyio
from anyio.abc import TaskStatus

from dynconf_k8s.agent.metrics import AgentMetrics
from dynconf_k8s.metrics_port import READ_LIMIT, PortRequest, parse_request, serve_port

__all__ = ["READ_LIMIT", "answer", "handle_request", "serve_metrics"]

log = logging.getLogger("dynconf_k8s.agent.server")


def answer(metrics: AgentMetrics, request: PortRequest) -> tuple[int, bytes]:
    """The status and body for one request (pure, so tests need no socket)."""
    state = metrics.state
    if request.path == "/applied" and request.method == "POST":
        fingerprint = request.body.decode("utf-8", "replace").strip()
        if not fingerprint:
            return 400, b"the body is the fingerprint this application is running\n"
        if state.acknowledge(fingerprint):
            return 200, b"current\n"
        published = state.published_fingerprint or "none"
        return 409, f"a different document is published: {published}\n".encode()
    if request.path == "/healthz":
        return 200, b"ok\n"
    if request.path == "/readyz":
        if state.ready():
            return 200, b"ok\n"
        return 503, b"no configuration rendered\n"
    return 200, metrics.exposition()


def handle_request(raw: bytes, metrics: AgentMetrics) -> tuple[int, bytes]:
    """:func:`answer` for the raw bytes of a request."""
    return answer(metrics, parse_request(raw))


async def serve_metrics(
    metrics: AgentMetrics,
    host: str,
    port: int,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the bound port through ``task_status``."""
    await serve_port(partial(answer, metrics), host, port, log=log, task_status=task_status)
