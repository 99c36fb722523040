"""The three gates: which agent-env names and which stores a namespace may use.

One grammar for all three (``agentEnvAllow``, ``sourceAllow``, ``sourceDeny``)::

    spec   = group *( ";" group )
    group  = [ namespace ":" ] names     ; no head, or "*", means every namespace
    names  = name *( "," name )

A refusal lists only the rules that apply to the pod's own namespace (the ``*`` groups and
its own): one tenant's refusal must not describe another's setup.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from dynconf_k8s.contract.rules import STORES

__all__ = ["Gate", "GateGroup", "parse_gate"]

_NAMESPACE = re.compile(r"[a-z0-9-]+")
_ENV_PATTERN = re.compile(r"[A-Z_][A-Z0-9_]*\*?")
ENV_NAME_RULE: Final = "an UPPER_SNAKE variable name, a prefix glob such as AWS_*, or *"


@dataclass(frozen=True, slots=True)
class GateGroup:
    """One ``namespace: names`` group; ``namespace`` ``None`` means every namespace."""

    namespace: str | None
    names: tuple[str, ...]

    def applies_to(self, namespace: str) -> bool:
        return self.namespace is None or self.namespace == namespace


@dataclass(frozen=True)
class Gate:
    """A parsed gate; empty when the installation set nothing."""

    groups: tuple[GateGroup, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.groups

    def names_for(self, namespace: str) -> list[str]:
        """What this gate names for a namespace, in the order the installer wrote them."""
        out: list[str] = []
        for group in self.groups:
            if group.applies_to(namespace):
                out.extend(n for n in group.names if n not in out)
        return out

    def matches(self, namespace: str, name: str) -> bool:
        """Whether ``name`` is named for ``namespace`` (exactly, by ``*``, or by prefix glob)."""
        for pattern in self.names_for(namespace):
            if pattern in ("*", name):
                return True
            if pattern.endswith("*") and name.startswith(pattern[:-1]):
                return True
        return False

    def render(self) -> str:
        """The gate in its string grammar (used to compare the two spellings)."""
        return "; ".join(f"{g.namespace or '*'}: {', '.join(g.names)}" for g in self.groups)


def _store_name(name: str) -> str | None:
    if name == "*" or name in STORES:
        return None
    return "is not a store; the stores are " + ", ".join(STORES)


def _env_name(name: str) -> str | None:
    if name == "*" or _ENV_PATTERN.fullmatch(name):
        return None
    return "is not " + ENV_NAME_RULE


def parse_gate(text: str, *, stores: bool, where: str) -> tuple[Gate, list[str]]:
    """Parse one gate; returns the gate and every problem (each a sentence naming ``where``)."""
    check: Callable[[str], str | None] = _store_name if stores else _env_name
    problems: list[str] = []
    groups: list[GateGroup] = []
    if not text.strip():
        return Gate(), problems
    for raw in text.split(";"):
        if not raw.strip():
            continue
        head, colon, body = raw.partition(":")
        namespace: str | None
        if colon:
            namespace = head.strip()
            if namespace == "*":
                namespace = None
            elif not _NAMESPACE.fullmatch(namespace):
                problems.append(
                    f"{where}: the namespace head of group {raw.strip()!r} is not a namespace "
                    "name ([a-z0-9-]+) or *"
                )
                continue
        else:
            namespace, body = None, head
        names = tuple(n.strip() for n in body.split(",") if n.strip())
        if not names:
            problems.append(
                f"{where}: group {raw.strip()!r} names nothing; list names after the "
                "namespace, or drop the group"
            )
            continue
        for name in names:
            problem = check(name)
            if problem:
                problems.append(f"{where}: {name!r} {problem}")
        groups.append(GateGroup(namespace, names))
    return Gate(tuple(groups)), problems
