"""The annotation contract, pure: the registry, parsing, installation settings, gates, pins.

No I/O happens here: the webhook, ``validate`` and the tests feed strings and objects in and
get plans, refusals and warnings out.
"""

from dynconf_k8s.contract.document import DOCUMENT_KEYS, merge_environment, render_document
from dynconf_k8s.contract.gates import Gate, GateGroup, parse_gate
from dynconf_k8s.contract.installation import (
    BUILTIN_IMAGE,
    ENV,
    Installation,
    InstallationError,
    TierValue,
    parse_installation,
)
from dynconf_k8s.contract.parse import INJECTED, injected_container_present, parse_pod
from dynconf_k8s.contract.plan import Also, Plan, Render
from dynconf_k8s.contract.refusals import (
    CONFLICT,
    MALFORMED,
    PINNED,
    POLICY,
    REASON_LABELS,
    Refusal,
)
from dynconf_k8s.contract.registry import KEYS, PREFIX, REGISTRY, Key, annotation
from dynconf_k8s.contract.rules import STORES

__all__ = [
    "BUILTIN_IMAGE",
    "CONFLICT",
    "DOCUMENT_KEYS",
    "ENV",
    "INJECTED",
    "KEYS",
    "MALFORMED",
    "PINNED",
    "POLICY",
    "PREFIX",
    "REASON_LABELS",
    "REGISTRY",
    "STORES",
    "Also",
    "Gate",
    "GateGroup",
    "Installation",
    "InstallationError",
    "Key",
    "Plan",
    "Refusal",
    "Render",
    "TierValue",
    "annotation",
    "injected_container_present",
    "merge_environment",
    "parse_gate",
    "parse_installation",
    "parse_pod",
    "render_document",
]
