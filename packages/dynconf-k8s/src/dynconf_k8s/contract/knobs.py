"""Which rule checks which installation knob: the rule of the row it stands in for.

An installation default is validated exactly as the annotation it stands in for, so each
knob's rule is read off its :class:`~dynconf_k8s.contract.registry.Key` row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from dynconf_k8s.contract.registry import KEYS
from dynconf_k8s.contract.rules import RuleError, nonempty

__all__ = ["KNOB_RULES", "check_installation_value", "nonempty"]


KNOB_RULES: Final[Mapping[str, Callable[[str], object]]] = {
    row.name: row.rule for row in KEYS if row.fleet_env or row.store_knob
}
"""Installation-tier rules by knob; annotations of the same name use the same rule."""


def check_installation_value(knob: str, text: str) -> str | None:
    """The rule a tier value breaks, or ``None``."""
    rule = KNOB_RULES.get(knob, nonempty)
    try:
        rule(text)
    except RuleError as exc:
        return str(exc)
    return None
