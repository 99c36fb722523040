"""The registry is the contract: every key documented, suffix rules read off the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynconf_k8s.contract.registry import KEYS, split_key

DOC = Path(__file__).resolve().parents[4] / "docs" / "annotations.md"


@pytest.mark.parametrize("key", [row.name for row in KEYS])
def test_every_registry_key_has_a_section_in_the_annotation_reference(key):
    assert f"## `dynamic-config.rs/{key}`" in DOC.read_text(encoding="utf-8")


def test_retired_keys_are_documented_as_retired():
    text = DOC.read_text(encoding="utf-8")
    for row in KEYS:
        if row.deprecated_since:
            assert f"Deprecated since {row.deprecated_since}" in text


def test_suffix_accepted_only_on_per_render_rows():
    for row in KEYS:
        accepted = split_key(f"dynamic-config.rs/{row.name}.cache") is not None
        assert accepted == row.per_render, row.name


def test_every_rows_flag_is_one_the_agents_parser_accepts() -> None:
    from dynconf_k8s.agent.flags import BARE_FLAGS, VALUE_FLAGS

    flags = {flag for key in KEYS for flag in key.flags}

    assert flags <= BARE_FLAGS | VALUE_FLAGS


def test_every_agent_flag_but_one_shot_comes_from_a_row() -> None:
    # --one-shot is the agent's own (a run outside Kubernetes); the webhook's init container
    # is the agent without --watch
    from dynconf_k8s.agent.flags import BARE_FLAGS, VALUE_FLAGS
    from dynconf_k8s.contract.registry import ALSO, FLAG_KEYS

    from_rows = {flag for key in KEYS for flag in key.flags} | {"--also"}

    assert (BARE_FLAGS | VALUE_FLAGS) - from_rows == {"--one-shot"}
    assert FLAG_KEYS["--also"] == ALSO
