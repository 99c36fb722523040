"""Admission runs the agent's own flag parser over every agent it is about to inject.

The webhook writes the agent's command line; the agent judges it again at start. Two sets of
rules would drift (a ``.env`` path, ``startup-policy: bogus`` admitted, then a crash-looping
agent), so there is one: :func:`dynconf_k8s.agent.flags.parse_args`, called here on the exact
``args`` and ``env`` of each injected container. Its refusal becomes the pod's, naming the
annotation that produced the refused flag: the parser's refusal is data (its ``field`` is the
contract row), rendered here with annotation keys, so no sentence is read or rewritten.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

from dynconf_k8s.agent.flags import UsageError, parse_also, parse_args
from dynconf_k8s.contract.plan import Plan, Render
from dynconf_k8s.contract.refusals import Refusal
from dynconf_k8s.contract.registry import ALSO, PREFIX, annotation
from dynconf_k8s.webhook.patch import AgentContainers, agent_containers, also_arg

__all__ = ["check_agent_args"]

ACCEPTED_MEMO: Final = 4096
"""Agent command lines whose acceptance is remembered (least recently used dropped first)."""
RUNTIME_VALUE: Final = "set-at-runtime"
"""What a Secret- or downward-API-backed variable stands for here: present, value unknown."""


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    return {
        entry["name"]: entry.get("value", RUNTIME_VALUE) for entry in container.get("env") or []
    }


@functools.lru_cache(maxsize=ACCEPTED_MEMO)
def _accepted(args: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> None:
    """:func:`parse_args` of one agent's command line, remembered once it is accepted.

    The parser's answer depends only on the arguments, the environment and the stores this
    process loaded, which never change while it runs; the pods of one workload carry the
    same agent, so each is judged once. A refusal raises and is not remembered.
    """
    parse_args(args, dict(env))


def _key_of(field: str | None, render: Render, plan: Plan) -> str:
    """The annotation behind a refused contract field (``also.<name>`` for an ``--also``)."""
    if field is None:
        return annotation("inject") if render.name is None else f"{PREFIX}*.{render.name}"
    if field == ALSO:
        for also in plan.also:
            try:
                parse_also(also_arg(also), None)
            except UsageError:
                return annotation(ALSO, also.name)
        return f"{PREFIX}{ALSO}.*"
    return annotation(field, render.name)


def check_agent_args(plan: Plan, containers: AgentContainers | None = None) -> None:
    """Raise :class:`Refusal` when the agent would refuse any container this plan injects.

    ``containers`` are the agents :func:`~dynconf_k8s.webhook.patch.agent_containers` built
    for the patch, so the parser judges the very arguments the pod will carry.
    """
    agents = agent_containers(plan) if containers is None else containers
    for render in (plan.default, *plan.named):
        for watch in (False, True):
            container = agents.get((render.name, watch))
            if container is not None:
                _check(container, render, plan)


def _check(container: Mapping[str, Any], render: Render, plan: Plan) -> None:
    try:
        _accepted(tuple(container["args"]), tuple(_env(container).items()))
    except UsageError as error:
        key = _key_of(error.refusal.field, render, plan)
        sentence = error.refusal.render(lambda field: _key_of(field, render, plan))
        raise Refusal(
            f"{key} would stop the agent at start ({sentence}) — "
            "fix the annotation so the agent can take it",
            field=None if error.refusal.field is None else key,
        ) from None
