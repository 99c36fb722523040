"""``store-budget`` follows the per-store tier: the installation's group, its pin, the agent flag."""

from __future__ import annotations

from typing import Any

import pytest

from dynconf_k8s.agent.flags import parse_args
from dynconf_k8s.contract.installation import InstallationError, parse_installation
from dynconf_k8s.contract.parse import Refusal, parse_pod
from dynconf_k8s.webhook.patch import build_patch

BASE = {
    "dynamic-config.rs/inject": "true",
    "dynamic-config.rs/source": "consul",
    "dynamic-config.rs/endpoint": "http://consul:8500",
    "dynamic-config.rs/key": "app/config.json",
    "dynamic-config.rs/path": "/config/app.json",
}


def agent_args(annotations: dict[str, str], store_defaults: str = "") -> list[str]:
    env = {"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": store_defaults} if store_defaults else {}
    pod: dict[str, Any] = {
        "metadata": {"name": "app", "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }
    plan, _warnings = parse_pod(pod, parse_installation(env))
    assert plan is not None
    for op in build_patch(pod, plan):
        value = op.get("value")
        if isinstance(value, dict) and str(value.get("name", "")).startswith("dynamic-config-"):
            args = [str(arg) for arg in value["args"]]
            parse_args(args, {})  # the agent takes what the webhook wrote
            return args
    raise AssertionError("no agent container in the patch")


def budget_of(args: list[str]) -> str | None:
    return args[args.index("--store-budget") + 1] if "--store-budget" in args else None


def test_no_budget_anywhere_writes_no_flag() -> None:
    assert budget_of(agent_args(BASE)) is None


def test_the_stores_tier_budget_reaches_the_agent() -> None:
    assert budget_of(agent_args(BASE, "consul: store-budget=5/10")) == "5/10"


def test_another_stores_budget_does_not_apply() -> None:
    assert budget_of(agent_args(BASE, "vault: store-budget=5/10")) is None


def test_a_pinned_budget_refuses_a_differing_annotation() -> None:
    with pytest.raises(Refusal, match="store-budget"):
        agent_args({**BASE, "dynamic-config.rs/store-budget": "50"}, "consul: store-budget=5!")


def test_a_bad_budget_in_the_installation_is_refused_at_start() -> None:
    with pytest.raises(InstallationError, match="consul's store-budget"):
        parse_installation({"DYNAMIC_CONFIG_AGENT_STORE_DEFAULTS": "consul: store-budget=fast"})
