"""The metrics port: a deliberately small HTTP server the kubelet and Prometheus talk to.

Raw HTTP on anyio, as the contract describes it: at most 1024 bytes of request are read, every
answer closes the connection and is ``text/plain; version=0.0.4``. ``POST /applied`` records the
application's acknowledgement (200 current, 409 names the published fingerprint, 400 for an
empty body), ``/healthz`` answers while the process lives, ``/readyz`` says whether a document
is rendered (fresh and acknowledged when those are required), and every other request gets the
exposition. It runs on the loop beside the watch: a scrape never waits on a store.
"""

from __future__ import annotations

import logging
from typing import Final

import anyio
from anyio.abc import SocketStream, TaskStatus

from dynconf_k8s.agent.metrics import CONTENT_TYPE, AgentMetrics

__all__ = ["handle_request", "serve_metrics"]

READ_LIMIT: Final = 1024
_READ_DEADLINE: Final = 5.0
_REASONS: Final = {200: "OK", 400: "Bad Request", 409: "Conflict", 503: "Service Unavailable"}

log = logging.getLogger("dynconf_k8s.agent.server")


def handle_request(raw: bytes, metrics: AgentMetrics) -> tuple[int, bytes]:
    """The status and body for one request (pure, so tests need no socket)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    request_line = head.split(b"\r\n", 1)[0].split()
    method = request_line[0].decode("ascii", "replace") if request_line else ""
    target = request_line[1].decode("ascii", "replace") if len(request_line) > 1 else "/"
    path = target.split("?", 1)[0]
    state = metrics.state
    if path == "/applied" and method == "POST":
        fingerprint = body.decode("utf-8", "replace").strip()
        if not fingerprint:
            return 400, b"the body is the fingerprint this application is running\n"
        if state.acknowledge(fingerprint):
            return 200, b"current\n"
        published = state.published_fingerprint or "none"
        return 409, f"a different document is published: {published}\n".encode()
    if path == "/healthz":
        return 200, b"ok\n"
    if path == "/readyz":
        if state.ready():
            return 200, b"ok\n"
        return 503, b"no configuration rendered\n"
    return 200, metrics.exposition()


def _response(status: int, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\n"
        f"content-type: {CONTENT_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


async def _read_request(stream: SocketStream) -> bytes:
    received = b""
    with anyio.move_on_after(_READ_DEADLINE):
        while len(received) < READ_LIMIT:
            try:
                received += await stream.receive(READ_LIMIT - len(received))
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
            head, sep, body = received.partition(b"\r\n\r\n")
            if not sep:
                continue
            if len(body) >= _content_length(head):
                break
    return received[:READ_LIMIT]


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return int(value.strip())
    return 0


async def serve_metrics(
    metrics: AgentMetrics,
    host: str,
    port: int,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the bound port through ``task_status``."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port, reuse_port=False)

    async def one(stream: SocketStream) -> None:
        async with stream:
            try:
                raw = await _read_request(stream)
                status, body = handle_request(raw, metrics)
                await stream.send(_response(status, body))
            except (anyio.BrokenResourceError, OSError):
                return

    async with listener:
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
        log.info("metrics_serving", extra={"address": f"{host}:{bound}"})
        task_status.started(bound)
        await listener.serve(one)
