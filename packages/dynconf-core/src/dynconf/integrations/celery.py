"""Celery workers: the lifecycle on the worker's signals, a snapshot per task.

    app = Celery("shop", broker=...)
    setup(app, config)

    @app.task
    def charge(order_id):
        settings = current(config)     # the model this task began with

The worker process loads and follows in ``worker_init`` (a bad file stops the worker
before it takes a task). A prefork child keeps that snapshot across the fork but none of
the watcher threads, so ``worker_process_init`` re-arms the follow in each child, after
the fork and without reloading; ``worker_process_shutdown`` and ``worker_shutdown`` stop.
``task_prerun`` opens the task's snapshot and ``task_postrun`` closes it (both run on the
thread that runs the task). The task ``dynconf.readiness`` answers the readiness report
of the process that ran it.
"""

from __future__ import annotations

import json
from typing import Any, Unpack

from dynconf.integrations._common import (
    FollowOptions,
    Lifecycle,
    Target,
    current,
    enter,
    leave,
    lifecycle_of,
    missing,
    readiness,
    request_snapshot,
)

try:
    from celery import Celery
    from celery.signals import (
        task_postrun,
        task_prerun,
        worker_init,
        worker_process_init,
        worker_process_shutdown,
        worker_shutdown,
    )
except ImportError as absent:  # the extra is not installed
    raise missing("Celery", "celery", absent) from None

__all__ = ["CeleryIntegration", "current", "request_snapshot", "setup"]


class CeleryIntegration:
    """The signal handlers for one Celery app (kept so they stay connected)."""

    def __init__(self, app: Celery, lifecycle: Lifecycle, stale_after: float | None) -> None:
        self.app = app
        self.lifecycle = lifecycle
        self._tokens: dict[str, Any] = {}

        def on_worker_init(**_: Any) -> None:
            lifecycle.start()

        def on_process_init(**_: Any) -> None:
            lifecycle.ensure() if lifecycle.started else lifecycle.start()

        def on_shutdown(**_: Any) -> None:
            lifecycle.stop()

        def on_prerun(task_id: str = "", task: Any = None, **_: Any) -> None:
            if task is not None and getattr(task, "app", app) is not app:
                return
            self._tokens[task_id] = enter(lifecycle.snapshot())

        def on_postrun(task_id: str = "", **_: Any) -> None:
            token = self._tokens.pop(task_id, None)
            if token is not None:
                leave(token)

        self._handlers = (on_worker_init, on_process_init, on_shutdown, on_prerun, on_postrun)
        worker_init.connect(on_worker_init, weak=False)
        worker_process_init.connect(on_process_init, weak=False)
        worker_process_shutdown.connect(on_shutdown, weak=False)
        worker_shutdown.connect(on_shutdown, weak=False)
        task_prerun.connect(on_prerun, weak=False)
        task_postrun.connect(on_postrun, weak=False)

        @app.task(name="dynconf.readiness", shared=False)
        def dynconf_readiness() -> dict[str, Any]:
            reply = readiness(*lifecycle.targets, stale_after=stale_after)
            body: dict[str, Any] = json.loads(reply.body)
            body["ready"] = reply.status == 200
            return body

        self.readiness_task = dynconf_readiness

    def disconnect(self) -> None:
        """Disconnect the signal handlers (a test that builds several apps in one process)."""
        worker_init.disconnect(self._handlers[0])
        worker_process_init.disconnect(self._handlers[1])
        worker_process_shutdown.disconnect(self._handlers[2])
        worker_shutdown.disconnect(self._handlers[2])
        task_prerun.disconnect(self._handlers[3])
        task_postrun.disconnect(self._handlers[4])


def setup(
    app: Celery,
    target: Target | Lifecycle,
    *more: Target,
    stale_after: float | None = None,
    **follow: Unpack[FollowOptions],
) -> CeleryIntegration:
    """Wire ``target`` into ``app``'s workers; answers the integration (``follow``: how the
    workers follow, :class:`~dynconf.integrations._common.FollowOptions`)."""
    return CeleryIntegration(app, lifecycle_of(target, *more, **follow), stale_after)
