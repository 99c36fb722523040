"""The annotation contract, pure: the registry, parsing, installation settings, gates, pins.

No I/O happens here: the webhook, ``validate`` and the tests feed strings and objects in and
get plans, refusals and warnings out.

Every name is imported from its module on first use (PEP 562): a process that needs one
module of the contract (the agent's flag parser reads only the registry's rows) does not pay
for the webhook's parsing, gates and installation settings at start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

_HOMES: dict[str, str] = {
    "Also": "dynconf_k8s.contract.plan",
    "BUILTIN_IMAGE": "dynconf_k8s.contract.installation",
    "CONFLICT": "dynconf_k8s.contract.refusals",
    "DOCUMENT_KEYS": "dynconf_k8s.contract.document",
    "ENV": "dynconf_k8s.contract.installation",
    "Gate": "dynconf_k8s.contract.gates",
    "GateGroup": "dynconf_k8s.contract.gates",
    "INJECTED": "dynconf_k8s.contract.parse",
    "Installation": "dynconf_k8s.contract.installation",
    "InstallationError": "dynconf_k8s.contract.installation",
    "KEYS": "dynconf_k8s.contract.registry",
    "Key": "dynconf_k8s.contract.registry",
    "MALFORMED": "dynconf_k8s.contract.refusals",
    "PINNED": "dynconf_k8s.contract.refusals",
    "POLICY": "dynconf_k8s.contract.refusals",
    "PREFIX": "dynconf_k8s.contract.registry",
    "Plan": "dynconf_k8s.contract.plan",
    "REASON_LABELS": "dynconf_k8s.contract.refusals",
    "REGISTRY": "dynconf_k8s.contract.registry",
    "Refusal": "dynconf_k8s.contract.refusals",
    "Render": "dynconf_k8s.contract.plan",
    "STORES": "dynconf_k8s.contract.rules",
    "TierValue": "dynconf_k8s.contract.installation",
    "annotation": "dynconf_k8s.contract.registry",
    "injected_container_present": "dynconf_k8s.contract.parse",
    "merge_environment": "dynconf_k8s.contract.document",
    "parse_gate": "dynconf_k8s.contract.gates",
    "parse_installation": "dynconf_k8s.contract.installation",
    "parse_pod": "dynconf_k8s.contract.parse",
    "render_document": "dynconf_k8s.contract.document",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


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
