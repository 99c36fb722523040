"""Configurations that work and are probably not what was meant: admitted, with a warning.

kubectl prints admission warnings, and a warning on every admission is one nobody reads,
so the bar is high: five configurations earn one, plus any retired key in the registry.
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf_k8s.contract.plan import Plan
from dynconf_k8s.contract.registry import KEYS, PREFIX, split_key

__all__ = ["warnings_for"]


def warnings_for(annotations: Mapping[str, str], plan: Plan) -> list[str]:
    """The warnings for an admitted plan, in a fixed order."""
    out: list[str] = []
    if plan.volume_medium == "disk":
        out.append(
            f"{PREFIX}volume-medium=disk keeps the rendered document on node-backed storage, "
            "where it outlives the pod"
        )
    modes = [r.file_mode for r in (plan.default, *plan.named) if r.file_mode is not None]
    if any(mode & 0o007 for mode in modes):
        out.append(
            f"{PREFIX}file-mode is world-readable, and every container in this pod can read "
            "the rendered document"
        )
    for render in (plan.default, *plan.named):
        if render.watch_seconds < 5:
            out.append(
                f"{PREFIX}watch-seconds is {render.watch_seconds} — every replica polls the "
                "store at that rate, and a native watch delivers changes without one"
            )
            break
    if any(r.tls_skip_verify for r in (plan.default, *plan.named)):
        out.append(
            f"{PREFIX}tls-skip-verify is on: this store is not authenticated, so anything on "
            "the network path can supply this pod's configuration and its credentials"
        )
    if plan.dynamic and not plan.revoke_on_shutdown:
        out.append(
            f"{PREFIX}revoke-on-shutdown is off: the credential stays valid after this pod is "
            "gone, until its lease expires"
        )
    retired = {row.name: row for row in KEYS if row.deprecated_since}
    for key in sorted(annotations):
        split = split_key(key) if key.startswith(PREFIX) else None
        row = retired.get(split[0]) if split else None
        if row is None:
            continue
        if row.replacement:
            out.append(
                f"{PREFIX}{row.name} is deprecated since {row.deprecated_since}; use "
                f"{PREFIX}{row.replacement}"
            )
        else:
            out.append(f"{PREFIX}{row.name} will be removed; it has no replacement")
    return out
