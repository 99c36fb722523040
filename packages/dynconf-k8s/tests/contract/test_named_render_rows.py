"""Every per-render row is honoured on a named render (or refused), never silently dropped."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from dynconf_k8s.contract import parse_installation, parse_pod
from dynconf_k8s.contract.refusals import Refusal
from dynconf_k8s.contract.registry import KEYS, Key
from dynconf_k8s.contract.rules import (
    parse_bool,
    parse_file_mode,
    parse_positive_seconds,
    parse_store_budget,
    parse_whole_seconds,
)
from dynconf_k8s.webhook.patch import agent_containers

from .differential import NAMED, _pod

_VALID = {
    parse_positive_seconds: "7",
    parse_whole_seconds: "20",
    parse_file_mode: "0600",
    parse_store_budget: "5",
}
_BASE = ("source", "endpoint", "key", "path")


def _valid(row: Key) -> str:
    if row.rule is parse_bool:
        return "false" if row.value is not False else "true"
    return _VALID.get(row.rule, "other-value")


def _named_watcher(annotations: Mapping[str, str]) -> list[str]:
    plan, _ = parse_pod(_pod(annotations), parse_installation({}))
    assert plan is not None
    return list(agent_containers(plan)[NAMED, True]["args"])


PER_RENDER_FLAG_ROWS = [
    row for row in KEYS if row.per_render and row.flags and row.name not in _BASE
]


@pytest.mark.parametrize("row", PER_RENDER_FLAG_ROWS, ids=lambda row: row.name)
def test_a_per_render_row_on_a_named_render_reaches_its_agent_or_is_refused(row: Key) -> None:
    baseline = _named_watcher({})
    try:
        args = _named_watcher({f"{row.name}.{NAMED}": _valid(row)})
    except Refusal:
        return  # a store or pairing rule refused it: said, not dropped
    assert args != baseline, f"{row.name}.{NAMED} was admitted and dropped"
    assert row.flags[0] in args


def test_timeout_and_tls_reload_reach_the_named_watcher() -> None:
    args = _named_watcher({f"timeout.{NAMED}": "7", f"tls-reload.{NAMED}": "false"})
    assert args[args.index("--timeout") + 1] == "7"
    assert "--no-tls-reload" in args


def test_a_named_tls_reload_that_is_not_a_switch_is_refused_by_its_key() -> None:
    with pytest.raises(Refusal) as caught:
        _named_watcher({f"tls-reload.{NAMED}": "bogus"})
    assert caught.value.field == f"dynamic-config.rs/tls-reload.{NAMED}"
