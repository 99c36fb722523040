"""The per-store call budgets a process takes from the installation in force, kept current.

The operator and the node agent pace every call to a store through the process's one
:func:`dynconf.budget.ledger`. Its budgets are the installation's per-store ``store-budget``
tiers, re-applied each time a new installation is in force; ``DYNAMIC_CONFIG_STORE_BUDGETS``,
when set, fixes them for the process's life instead (a variable never changes under a process).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.budget import BUDGETS_ENV, Budget, budgets_from_env, ledger, parse_budget
from dynconf_k8s.contract.installation import Installation
from dynconf_k8s.inforce.holder import Applied, InstallationInForce

__all__ = ["follow_budgets", "store_budgets"]


def store_budgets(installation: Installation) -> dict[str, Budget]:
    """The budgets an installation sets (``storeDefaults.<store>.store-budget``).

    The tier was validated by the parser with the agent's own rule, so it parses here.
    """
    out: dict[str, Budget] = {}
    for store, knobs in installation.per_store.items():
        tier = knobs.get("store-budget")
        budget = parse_budget(tier.text) if tier is not None else None
        if budget is not None:
            out[store] = budget
    return out


def follow_budgets(holder: InstallationInForce, environ: Mapping[str, str]) -> bool:
    """Configure the ledger now and after every swap; False when the variable fixes them.

    Raises :class:`ValueError` naming the variable when it is set and not a budget list.
    """
    if environ.get(BUDGETS_ENV, "").strip():
        ledger().configure(budgets_from_env(environ))
        return False

    def configure(applied: Applied) -> None:
        ledger().configure(store_budgets(applied.installation))

    configure(holder.applied)
    holder.on_applied(configure)
    return True
