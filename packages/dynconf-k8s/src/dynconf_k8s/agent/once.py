"""Init mode: one fetch, one render, one publish, in this thread; and what both modes share.

The init container's whole life is the start-up the pod waits for, so its path is plain
blocking code: the store's one-shot read (:func:`dynconf.follow.fetch_once`: a blocking
store is called here, an async one runs on a loop of its own that ends with the read), then
the pipeline's :func:`~dynconf.pipeline.prepare` and :func:`~dynconf.pipeline.publish`. No
event loop, no worker thread and no anyio is started or imported for it; the sidecar's watch
loop (:mod:`.loop`) is imported only by a sidecar. The first publish of a process is always
a publish (:func:`.decide.decide`: nothing published yet, the canary never holds the first),
so the init agent has no decision to make.

:class:`AgentFatal` and the ``rendered`` log line live here because both modes use them.
"""

from __future__ import annotations

import logging

from dynconf.budget import ledger
from dynconf.errors import DynconfError, Origin
from dynconf.follow import fetch_once, reason_of
from dynconf.pipeline import log_rendered, prepare, publish
from dynconf.stores import Absent, StoreType
from dynconf_k8s.agent.flags import AgentSettings
from dynconf_k8s.agent.tracing import Tracing

__all__ = ["AgentFatal", "render_once"]

log = logging.getLogger("dynconf_k8s.agent")


class AgentFatal(Exception):
    """The agent must exit 1; the message is the one log line that says why."""


def render_once(settings: AgentSettings, store: StoreType, tracing: Tracing) -> None:
    """Fetch, render and publish every output once; any failure is :class:`AgentFatal`.

    The read is admitted and counted in the store's account (``--store-budget``), and the
    client is closed after it whatever it answered. The three spans are the sidecar's.
    """
    try:
        source = store.build(settings.spec)
    except DynconfError as error:
        raise AgentFatal(f"the store client could not be built: {error}") from None
    describe = source.describe()
    request = settings.request
    try:
        with tracing.span("fetch", store=describe, kind="first"):
            answer = fetch_once(source, close=True, calls=ledger().for_spec(settings.spec))
    except Exception as error:  # the store's failure, in one value-free line
        raise AgentFatal(f"the render failed: {reason_of(error)}") from None
    if isinstance(answer, Absent):
        raise AgentFatal("the document is not in the store; write it there or fix --key")
    try:
        with tracing.span("render", store=describe, kind="first", outputs=len(request.outputs)):
            prepared = prepare(answer, request, origin=Origin.remote(describe))
        with tracing.span(
            "publish", fingerprint=prepared.fingerprint, revision=prepared.revision, repair=False
        ):
            result = publish(prepared, request)
    except DynconfError as error:
        raise AgentFatal(f"the render failed: {error}") from None
    log_rendered(log, result, prepared)
