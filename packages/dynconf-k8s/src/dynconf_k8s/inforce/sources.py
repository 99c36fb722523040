"""Which live source a process follows: the resource, the mounted document, or none.

One rule for every component: a named resource wins (its spec is the document); else a
document path with a poll interval is watched on disk; else the installation read at start is
the installation for the process's life.
"""

from __future__ import annotations

from pathlib import Path

from dynconf_k8s.contract.document import merge_environment
from dynconf_k8s.contract.installation import parse_installation
from dynconf_k8s.inforce.disk import POLL_SECONDS, DocumentWatch
from dynconf_k8s.inforce.holder import InstallationInForce
from dynconf_k8s.inforce.resource import ClientFactory, ResourceWatch

__all__ = ["LiveSource", "document_installation", "live_source"]

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


def document_installation(path: str | None) -> InstallationInForce:
    """The holder of a process that takes the installation document alone (the operator, the
    node agent: the webhook's variables are not theirs). An absent file is an empty document.

    Raises :class:`~dynconf_k8s.contract.InstallationError` when the document is not valid.
    """
    text = None
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
    installation = parse_installation(merge_environment({}, text, origin=path or "(none)"))
    return InstallationInForce(installation, origin=path or "no document")
