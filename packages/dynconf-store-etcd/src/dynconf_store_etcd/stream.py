"""One open watch stream of the gateway, read by a background thread.

The gateway answers ``POST /v3/watch`` with a never-ending HTTP body of JSON lines, one
``WatchResponse`` (or one error) per line. A blocking read cannot notice a stop request, so
a daemon thread reads the lines into a queue and the watch loop waits on the queue in short
slices; :meth:`WatchStream.close` shuts the socket down, which ends the reading thread. A
line longer than the source's :class:`~dynconf.store_http.BodyBound` ends the stream with
the engine's :class:`~dynconf.errors.OversizeError` as soon as it passes it, so a value past
the ceiling is never held whole.

etcd3gw's own ``Watcher`` is not used: it drops the response header (the revision a resume
needs), swallows a stream error inside an executor, and cannot tell a cancelled watch from
a created one.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from dynconf.store_http import BODY_CHUNK

if TYPE_CHECKING:
    import requests

    from dynconf.store_http import BodyBound

__all__ = ["STOP_SLICE", "StreamEnded", "StreamItem", "WatchStream"]

STOP_SLICE: Final = 0.25
"""How long a wait on the stream lasts before the stop flag is checked again, in seconds."""


@dataclass(frozen=True, slots=True)
class StreamItem:
    """One decoded line of the stream: the ``result`` or the ``error`` object."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StreamEnded:
    """The stream is over: closed by the server (``failure`` None) or broken by ``failure``."""

    failure: BaseException | None = None


class WatchStream:
    """Reads one streaming response on a daemon thread; :meth:`next` waits on what it read."""

    def __init__(self, response: requests.Response, bound: BodyBound) -> None:
        self._response = response
        self._bound = bound
        self._queue: queue.Queue[StreamItem | StreamEnded] = queue.Queue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="dynconf-etcd-watch", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            pending = b""
            for chunk in self._response.iter_content(chunk_size=BODY_CHUNK):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if len(line) > self._bound.limit:
                        self._bound.refuse(len(line))
                    if line.strip() and not self._decode(line):
                        return
                if len(pending) > self._bound.limit:
                    self._bound.refuse(len(pending))
            self._queue.put(StreamEnded())
        except Exception as exc:  # the reader must hand every failure to the loop
            self._queue.put(StreamEnded(None if self._closed.is_set() else exc))

    def _decode(self, line: bytes) -> bool:
        """Queue one line; False (and the end of the stream) when it is not JSON."""
        try:
            decoded = json.loads(line)
        except ValueError:
            self._queue.put(StreamEnded(ValueError("the watch stream sent a non-JSON line")))
            return False
        if isinstance(decoded, dict):
            result = decoded.get("result")
            error = decoded.get("error")
            self._queue.put(
                StreamItem(
                    result=result if isinstance(result, dict) else None,
                    error=error if isinstance(error, dict) else None,
                )
            )
        return True

    def next(self, timeout: float = STOP_SLICE) -> StreamItem | StreamEnded | None:
        """The next item, or ``None`` when nothing arrived within ``timeout`` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Shut the socket down (unblocking the reader) and release the response."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            fileno = self._response.raw.fileno()
            sock = socket.fromfd(fileno, socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()
        except (OSError, ValueError, AttributeError):
            pass  # already gone: the reader has ended or will end on its own
        with contextlib.suppress(Exception):  # a broken response may raise while closing
            self._response.close()
        self._thread.join(timeout=2.0)
