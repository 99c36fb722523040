"""Where each resolved value came from: the record ``explain`` prints beside admission's answer.

The resolver (:func:`dynconf_k8s.contract.parse.parse_pod`) and admission's gates
(:func:`dynconf_k8s.webhook.admission.decide`) note here, as they decide, which tier answered
each key (annotation, class, per-store, fleet, built-in), whether the installation pinned it
and which gate judged it. Nothing reads the record to decide anything: admission passes no
record (and pays nothing), ``explain`` passes one and renders it. There is one resolver; this
is its memory, not a second one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from dynconf_k8s.contract.installation import TierValue

__all__ = ["TIERS", "GateCheck", "Origin", "Provenance"]

ANNOTATION: Final = "annotation"
CLASS: Final = "class"
PER_STORE: Final = "per-store"
FLEET: Final = "fleet"
BUILT_IN: Final = "built-in"
TIERS: Final = (ANNOTATION, CLASS, PER_STORE, FLEET, BUILT_IN)
"""The tiers, strongest first."""


@dataclass(frozen=True, slots=True)
class Origin:
    """One key's answer: its text in force and who gave it.

    ``value`` is ``None`` when nobody set the key and the contract's built-in default applies
    (the registry row's ``default`` says what it is). ``setting`` is the installation's
    spelling of the tier that answered (``DYNAMIC_CONFIG_AGENT_MODE``, ``perStore.consul``, a
    class name); ``pinned`` says the installation pins that value; ``overrides`` names an open
    installation value the annotation replaced; ``note`` says why a built-in moved.
    """

    key: str
    value: str | None
    tier: str
    setting: str | None = None
    pinned: bool = False
    overrides: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One gate or installation opt-in that judged a key, and whether it let it through.

    ``name`` is the part of the value the gate judged when it judges parts (each variable
    of ``agent-env``).
    """

    key: str
    gate: str
    admitted: bool
    name: str | None = None


def _tier_name(tier: TierValue) -> str:
    return PER_STORE if tier.tier.startswith("perStore.") else FLEET


@dataclass
class Provenance:
    """The record of one pod's resolution, in the order the resolver consulted the keys."""

    origins: dict[str, Origin] = field(default_factory=dict)
    gates: list[GateCheck] = field(default_factory=list)

    def resolved(self, key: str, text: str | None, tier: TierValue | None) -> None:
        """Note a key answered by the annotation ``text`` or else by the installation's ``tier``.

        The first answer for a key stands (the resolver may consult a key twice: the pin
        check, then the value); a key a class filled stays the class's.
        """
        if text is not None:
            pinned = tier is not None and tier.pinned and tier.text == text
            overrides = tier.tier if tier is not None and tier.text != text else None
            origin = Origin(key, text, ANNOTATION, pinned=pinned, overrides=overrides)
            if tier is not None and pinned:
                origin = replace(origin, setting=tier.tier)
        elif tier is not None:
            origin = Origin(key, tier.text, _tier_name(tier), tier.tier, pinned=tier.pinned)
        else:
            origin = Origin(key, None, BUILT_IN)
        found = self.origins.get(key)
        if found is None:
            self.origins[key] = origin
        elif found.tier == CLASS and found.value == text:
            self.origins[key] = replace(found, pinned=origin.pinned)

    def builtin(self, key: str, value: str, note: str | None = None) -> None:
        """Note the value the contract's built-in gave (or a built-in floor raised it to)."""
        self.origins[key] = Origin(key, value, BUILT_IN, note=note)

    def filled_by_class(self, key: str, value: str, name: str) -> None:
        """Note a key the pod's DynamicConfigClass filled in."""
        self.origins[key] = Origin(key, value, CLASS, setting=name)

    def gate(self, key: str, gate: str, admitted: bool, name: str | None = None) -> None:
        """Note that ``gate`` judged ``key`` (once per key and gate; a refusal is the last)."""
        check = GateCheck(key, gate, admitted, name)
        if check not in self.gates:
            self.gates.append(check)
