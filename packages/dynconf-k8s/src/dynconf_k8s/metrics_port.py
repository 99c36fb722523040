"""The one plain-HTTP port the sidecar agent and the node agent answer probes and scrapes on.

Deliberately small, as the contract describes the agent's port: at most 1024 bytes of a
request are read (within 5 s), every answer is ``text/plain; version=0.0.4`` and closes the
connection. What each path means is the caller's (``answer``); a scrape runs on the loop beside
the watch, so it never waits on a store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.abc
from anyio.abc import SocketStream, TaskStatus

__all__ = ["CONTENT_TYPE", "READ_LIMIT", "PortRequest", "parse_request", "serve_port"]

CONTENT_TYPE: Final = "text/plain; version=0.0.4"
READ_LIMIT: Final = 1024
_READ_DEADLINE: Final = 5.0
_REASONS: Final = {200: "OK", 400: "Bad Request", 409: "Conflict", 503: "Service Unavailable"}


@dataclass(frozen=True, slots=True)
class PortRequest:
    method: str
    path: str
    """The target without its query."""
    body: bytes


Answer = Callable[[PortRequest], tuple[int, bytes]]


def parse_request(raw: bytes) -> PortRequest:
    """The request line and body of what was read (anything unreadable is ``GET /``)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    request_line = head.split(b"\r\n", 1)[0].split()
    method = request_line[0].decode("ascii", "replace") if request_line else ""
    target = request_line[1].decode("ascii", "replace") if len(request_line) > 1 else "/"
    return PortRequest(method, target.split("?", 1)[0], body)


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


async def serve_port(
    answer: Answer,
    host: str,
    port: int,
    *,
    log: logging.Logger,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the bound port through ``task_status``."""
    listener = await anyio.create_tcp_listener(local_host=host, local_port=port, reuse_port=False)

    async def one(stream: SocketStream) -> None:
        async with stream:
            try:
                status, body = answer(parse_request(await _read_request(stream)))
                await stream.send(_response(status, body))
            except (anyio.BrokenResourceError, OSError):
                return

    async with listener:
        bound = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
        log.info("metrics_serving", extra={"address": f"{host}:{bound}"})
        task_status.started(bound)
        await listener.serve(one)
