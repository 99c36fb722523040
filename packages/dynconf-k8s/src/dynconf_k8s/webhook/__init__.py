"""The admission webhook: the pure ``admit`` function, its patch, the server and ``validate``."""

from dynconf_k8s.webhook.admission import Decision, admit, decide, dumps_compact, dumps_pretty
from dynconf_k8s.webhook.classes import ClassEntry, ClassMap
from dynconf_k8s.webhook.patch import build_patch
from dynconf_k8s.webhook.settings import WebhookSettings, load_installation

__all__ = [
    "ClassEntry",
    "ClassMap",
    "Decision",
    "WebhookSettings",
    "admit",
    "build_patch",
    "decide",
    "dumps_compact",
    "dumps_pretty",
    "load_installation",
]
