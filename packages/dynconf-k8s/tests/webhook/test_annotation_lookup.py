"""Admission reads a pod's annotations by name, and reads exactly the keys the contract spells.

:class:`~dynconf_k8s.contract.parse._Pod` indexes a pod's annotations by ``(base, suffix)`` once
instead of writing each key out for every lookup (admission's hot path). These tests hold the
index to the plain lookup it replaced: every name and suffix answers what
``annotations.get(annotation(name, suffix))`` answers, and keys the contract cannot spell —
a trailing dot, a dotted suffix — are never read as a key it can.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dynconf_k8s.contract import parse_installation
from dynconf_k8s.contract.parse import _Pod
from dynconf_k8s.contract.registry import ALSO, REGISTRY, annotation
from dynconf_k8s.webhook.admission import Decision

ODD_KEYS = {
    "dynamic-config.rs/source.": "vault",
    "dynamic-config.rs/key..x": "a",
    "dynamic-config.rs/path.a.b": "/config/x.json",
    "dynamic-config.rs/": "empty",
    "dynamic-config.rs/.x": "dotted",
    "other.example/source": "etcd",
}


def test_every_lookup_answers_what_the_spelled_key_answers() -> None:
    annotations = {
        **ODD_KEYS,
        annotation("source"): "consul",
        annotation("key", "cache"): "myapp/cache.json",
        annotation(ALSO, "db"): "/config/db.env",
        annotation("inject"): "true",
    }
    pod = _Pod(annotations, {}, parse_installation({}))
    for name in (*REGISTRY, ALSO, ""):
        for suffix in (None, "", "cache", "db", "x", "a"):
            assert pod.get(name, suffix) == annotations.get(annotation(name, suffix)), (
                name,
                suffix,
            )


@pytest.mark.parametrize("key", ["dynamic-config.rs/inject.", "dynamic-config.rs/inject..x"])
def test_a_key_the_contract_cannot_spell_is_not_read_as_inject(
    key: str, make_pod: Callable[..., dict[str, Any]], judge: Callable[..., Decision]
) -> None:
    decision = judge(make_pod({key: "true"}))
    assert decision.outcome == "skipped"
    assert decision.response["response"]["allowed"] is True


def test_a_trailing_dot_is_refused_by_name_not_read_as_the_key(
    pod_with: Callable[..., dict[str, Any]], judge: Callable[..., Decision]
) -> None:
    decision = judge(pod_with({"source.": "consul"}, drop=("source",)))
    assert decision.response["response"]["allowed"] is False
    message = decision.response["response"]["status"]["message"]
    assert "dynamic-config.rs/source. is not part of the contract" in message
