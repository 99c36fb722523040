"""Which live source a process follows: the resource, the mounted document, or none.

One rule for every component: a named resource wins (its spec is the document); else a
document path with a poll interval is watched on disk; else the installation read at start is
the installation for the process's life.
"""

from __future__ import annotations

from dynconf_k8s.inforce.disk import POLL_SECONDS, DocumentWatch
from dynconf_k8s.inforce.holder import InstallationInForce
from dynconf_k8s.inforce.resource import ClientFactory, ResourceWatch

__all__ = ["LiveSource", "live_source"]

LiveSource = DocumentWatch | ResourceWatch


def live_source(
    holder: InstallationInForce,
    *,
    component: str,
    identity: str,
    resource: str | None = None,
    clients: ClientFactory | None = None,
    document: str | None = None,
    every: float | None = POLL_SECONDS,
) -> LiveSource | None:
    """The follower that feeds ``holder``, or ``None`` when nothing changes it live."""
    if resource and clients is not None:
        return ResourceWatch(resource, holder, clients, component=component, identity=identity)
    if document and every:
        return DocumentWatch(document, holder, every)
    return None
