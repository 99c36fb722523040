"""A small controller framework: watched caches, a delaying work queue, workers, backoff.

The shape is controller-runtime's, kept small enough to read in one sitting:

- an :class:`Informer` per watched kind lists once, then follows a watch from that list's
  resourceVersion (bookmarks keep it fresh; a ``410 Gone`` relists), holding the objects in
  memory and calling handlers with every change. Only our three kinds are watched: targets
  and Secrets are read by name, so memory does not grow with the cluster's other objects.
- a :class:`WorkQueue` holds each Render key at most once, at its earliest due time, and
  never hands the same key to two workers at once.
- :class:`Controller` runs the workers and owns every timing decision: a success requeues
  after the handler's interval spread ±25 %, a failure after 5 s doubling per consecutive
  failure up to 300 s (spread the same way), forgotten on the next success.

Handlers (:mod:`dynconf_k8s.operator.reconcile`) therefore contain no retry, sleep or
leadership logic.
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Final, Generic, TypeVar

from kubernetes import watch  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]
from urllib3.exceptions import HTTPError

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CEILING",
    "Controller",
    "Informer",
    "WorkQueue",
    "backoff_seconds",
    "spread",
]

BACKOFF_BASE: Final = 5.0
BACKOFF_CEILING: Final = 300.0
SPREAD: Final = 0.25
WATCH_SECONDS: Final = 240
"""Server-side watch timeout; the watch is reopened from the last resourceVersion."""

K = TypeVar("K", bound=Hashable)
Handler = Callable[[str, dict[str, Any], dict[str, Any] | None], None]
"""``handler(event_type, object, previous)`` with ``ADDED``/``MODIFIED``/``DELETED``."""

log = logging.getLogger("dynconf_k8s.operator.controller")
_random = random.SystemRandom()


def spread(seconds: float) -> float:
    """``seconds`` spread ±25 % so a fleet of Renders does not move in step."""
    return max(0.0, seconds * (1 + _random.uniform(-SPREAD, SPREAD)))


def backoff_seconds(failures: int) -> float:
    """The unspread wait after ``failures`` consecutive failures: 5 s, 10 s, … 300 s."""
    return min(BACKOFF_BASE * 2.0 ** max(0, min(failures - 1, 16)), BACKOFF_CEILING)


def object_key(raw: dict[str, Any]) -> tuple[str, str]:
    meta = raw.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Informer:
    """One kind's objects, listed then watched, held by ``(namespace, name)``."""

    def __init__(self, name: str, list_call: Callable[..., Any], **list_args: Any) -> None:
        self.name = name
        self._list_call = list_call
        self._list_args = list_args
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._handlers: list[Handler] = []
        self._watch: Any = None
        self.synced = threading.Event()

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop``; every failure relists after a short pause."""
        pause = 1.0
        while not stop.is_set():
            try:
                version = self._relist()
                self.synced.set()
                pause = 1.0
                self._follow(version, stop)
            except Exception as error:  # a stop closes the socket under any read
                if stop.is_set():
                    return
                if not isinstance(error, (ApiException, HTTPError, OSError, ValueError)):
                    raise
                status = getattr(error, "status", None)
                if status != 410:
                    log.warning(
                        "watch_failed",
                        extra={
                            "kind": self.name,
                            "status": status,
                            "error_type": type(error).__name__,
                        },
                    )
                    stop.wait(pause)
                    pause = min(pause * 2, 30.0)

    def stop(self) -> None:
        current = self._watch
        if current is not None:
            current.stop()
            response = getattr(current, "_resp", None)
            if response is not None:
                response.close()

    def _relist(self) -> str:
        answer = self._list_call(**self._list_args)
        listed = {object_key(item): _slim(item) for item in answer.get("items", [])}
        with self._lock:
            previous, self._objects = self._objects, listed
        for key, item in listed.items():
            before = previous.get(key)
            if before is None:
                self._dispatch("ADDED", item, None)
            elif _version(before) != _version(item):
                self._dispatch("MODIFIED", item, before)
        for key, item in previous.items():
            if key not in listed:
                self._dispatch("DELETED", item, item)
        return str((answer.get("metadata") or {}).get("resourceVersion", ""))

    def _follow(self, version: str, stop: threading.Event) -> None:
        while not stop.is_set():
            self._watch = watch.Watch()
            for event in self._watch.stream(
                self._list_call,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                deserialize=False,
                _request_timeout=WATCH_SECONDS + 30,
                **self._list_args,
            ):
                kind, item = event["type"], _slim(event["object"])
                version = str((item.get("metadata") or {}).get("resourceVersion", version))
                if kind == "BOOKMARK":
                    continue
                key = object_key(item)
                with self._lock:
                    before = self._objects.get(key)
                    if kind == "DELETED":
                        self._objects.pop(key, None)
                    else:
                        self._objects[key] = item
                self._dispatch(kind, item, before)
                if stop.is_set():
                    return

    def _dispatch(self, kind: str, item: dict[str, Any], before: dict[str, Any] | None) -> None:
        for handler in self._handlers:
            try:
                handler(kind, item, before)
            except Exception:  # a handler bug must not end the watch
                log.exception("handler_failed", extra={"kind": self.name})


def _slim(item: dict[str, Any]) -> dict[str, Any]:
    """The object without ``managedFields``, which no handler reads and which dominate size."""
    meta = item.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return item


def _version(item: dict[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("resourceVersion", ""))


class WorkQueue(Generic[K]):
    """Keys due at a time; each key queued once (earliest due wins) and processed alone."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._processing: set[K] = set()
        self._deferred: dict[K, float] = {}
        self._counter = 0
        self._cond = threading.Condition()
        self._closed = False

    def add(self, key: K, delay: float = 0.0) -> None:
        """Queue ``key`` to be handed out after ``delay`` seconds (sooner if already sooner)."""
        due = time.monotonic() + max(0.0, delay)
        with self._cond:
            if key in self._processing:
                self._deferred[key] = min(due, self._deferred.get(key, due))
                return
            if key in self._due and self._due[key] <= due:
                return
            self._push(key, due)

    def forget(self, key: K) -> None:
        """Drop ``key`` from the queue (a deleted object)."""
        with self._cond:
            self._due.pop(key, None)
            self._deferred.pop(key, None)

    def get(self, stop: threading.Event) -> K | None:
        """The next due key, waiting for one; ``None`` once the queue is closed."""
        with self._cond:
            while not self._closed and not stop.is_set():
                now = time.monotonic()
                while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                    heapq.heappop(self._heap)  # superseded by an earlier due time
                if self._heap and self._heap[0][0] <= now:
                    _, _, key = heapq.heappop(self._heap)
                    del self._due[key]
                    self._processing.add(key)
                    return key
                wait = self._heap[0][0] - now if self._heap else 1.0
                self._cond.wait(timeout=min(wait, 1.0))
            return None

    def done(self, key: K) -> None:
        """Release ``key``; an add that arrived while it was processed is queued now."""
        with self._cond:
            self._processing.discard(key)
            due = self._deferred.pop(key, None)
            if due is not None and (key not in self._due or self._due[key] > due):
                self._push(key, due)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._due)

    def _push(self, key: K, due: float) -> None:
        self._due[key] = due
        self._counter += 1
        heapq.heappush(self._heap, (due, self._counter, key))
        self._cond.notify()


class Controller(Generic[K]):
    """Workers over a queue of object keys; ``reconcile(key)`` returns the next interval.

    ``reconcile`` returns ``None`` when nothing is due (the key is forgotten until an event
    queues it again), the base seconds until the next reconcile on success, and raises on
    failure. ``spread_success=False`` requeues a success after exactly the seconds returned:
    for a handler whose interval is a floor (a rate limit), not a cadence.
    """

    def __init__(
        self,
        reconcile: Callable[[K], float | None],
        *,
        workers: int = 4,
        reported: tuple[type[BaseException], ...] = (),
        name: str = "reconcile",
        subject: str = "render",
        spread_success: bool = True,
    ) -> None:
        self.queue: WorkQueue[K] = WorkQueue()
        self._reconcile = reconcile
        self._workers = workers
        self._reported = reported
        self._name = name
        self._subject = subject
        self._spread_success = spread_success
        self._failures: dict[K, int] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def enqueue(self, key: K, delay: float = 0.0) -> None:
        self.queue.add(key, delay)

    def forget(self, key: K) -> None:
        self.queue.forget(key)
        with self._lock:
            self._failures.pop(key, None)

    def start(self, stop: threading.Event) -> None:
        for index in range(self._workers):
            thread = threading.Thread(
                target=self._work, args=(stop,), name=f"{self._name}-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def threads(self) -> list[threading.Thread]:
        """The worker threads ``start`` made."""
        return list(self._threads)

    def join(self, timeout: float) -> None:
        self.queue.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _work(self, stop: threading.Event) -> None:
        while not stop.is_set():
            key = self.queue.get(stop)
            if key is None:
                return
            try:
                self._one(key)
            finally:
                self.queue.done(key)

    def _one(self, key: K) -> None:
        try:
            interval = self._reconcile(key)
        except Exception as error:  # every failure backs off here, whatever raised it
            with self._lock:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
            if not isinstance(error, self._reported):
                log.exception("reconcile_crashed", extra={self._subject: _key_text(key)})
            self.queue.add(key, spread(backoff_seconds(failures)))
            return
        with self._lock:
            self._failures.pop(key, None)
        if interval is None:
            self.queue.forget(key)
        else:
            self.queue.add(key, spread(interval) if self._spread_success else interval)


def _key_text(key: Hashable) -> str:
    """``ns/name`` (or ``plural/ns/name``) for a log line."""
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)
