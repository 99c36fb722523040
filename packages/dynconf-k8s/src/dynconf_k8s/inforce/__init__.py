"""The installation in force, and the two sources that replace it live.

:class:`InstallationInForce` holds it (readers take one reference per request, no lock);
:class:`DocumentWatch` offers the mounted document when the kubelet swaps it;
:class:`ResourceWatch` offers the ``DynamicConfigInstallation``'s spec and reports, per replica,
what is in force. Variables are read once at start and win over either source, so a change to
one of them still needs a restart.
"""

from dynconf_k8s.inforce.budgets import follow_budgets, store_budgets
from dynconf_k8s.inforce.disk import DocumentWatch
from dynconf_k8s.inforce.holder import (
    OUTCOMES,
    Applied,
    InstallationInForce,
    InstallationMetrics,
    Offer,
)
from dynconf_k8s.inforce.resource import KIND, PLURAL, ResourceWatch
from dynconf_k8s.inforce.sources import LiveSource, document_installation, live_source

__all__ = [
    "KIND",
    "OUTCOMES",
    "PLURAL",
    "Applied",
    "DocumentWatch",
    "InstallationInForce",
    "InstallationMetrics",
    "LiveSource",
    "Offer",
    "ResourceWatch",
    "document_installation",
    "follow_budgets",
    "live_source",
    "store_budgets",
]
