"""The admission webhook: the pure ``admit`` function, its patch, the server and ``validate``,
and the two optional features that call the API server: the class poller and self-rotation."""

from dynconf_k8s.webhook.admission import Decision, admit, decide, dumps_compact, dumps_pretty
from dynconf_k8s.webhook.classes import ClassEntry, ClassMap, ClassPoller
from dynconf_k8s.webhook.kube import KubeAccess
from dynconf_k8s.webhook.patch import build_patch
from dynconf_k8s.webhook.rotation import RotationSettings, SelfRotation
from dynconf_k8s.webhook.settings import WebhookSettings, load_installation

__all__ = [
    "ClassEntry",
    "ClassMap",
    "ClassPoller",
    "Decision",
    "KubeAccess",
    "RotationSettings",
    "SelfRotation",
    "WebhookSettings",
    "admit",
    "build_patch",
    "decide",
    "dumps_compact",
    "dumps_pretty",
    "load_installation",
]
