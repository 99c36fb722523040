"""One generated annotation set, three front ends, one verdict naming one field.

The webhook (:func:`parse_pod`, then the agent's parser over the very arguments the patch
writes), the agent's parser given each annotation's value under the row's own flag, and the
node agent's volume parser given the same value under the row's CSI attribute must agree:
admitted ⇔ accepted ⇔ published, and a refusal names a contract field that each other front
end refuses too. Fields are compared as data (``Refusal.field``, ``UsageError.refusal``,
``VolumeRefused.field``), never read out of a sentence.

Used by ``test_differential.py`` (bounded, in CI) and ``bench/contract_differential.py``
(the long run).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hypothesis import strategies as st

from dynconf_k8s.agent.flags import UsageError, parse_args
from dynconf_k8s.contract import parse_installation, parse_pod
from dynconf_k8s.contract.refusals import Refusal
from dynconf_k8s.contract.registry import KEYS, REGISTRY, annotation, split_key
from dynconf_k8s.node.attributes import VolumeRefused, parse_volume
from dynconf_k8s.webhook.agentcheck import check_agent_args
from dynconf_k8s.webhook.patch import agent_containers

NAMED: Final = "cache"
"""The named render every generated set carries, so per-render rows are judged there too."""
_BASE_ROWS: Final = ("source", "endpoint", "key", "path")
_CONTEXTUAL: Final = ("revoke-grace", "notify-http")
"""Rows whose flag the patch writes only with another key (``dynamic``, a mode), so a value
alone is not one verdict."""
ROWS: Final = tuple(
    row
    for row in KEYS
    if row.flags
    and not row.bare
    and row.flag_carries == "value"
    and not (row.store_field or row.setting)
    and not (row.store_input or "").startswith("tls.")
    and row.name not in (*_BASE_ROWS, *_CONTEXTUAL)
)
"""The rows whose value the agent's flag carries as written, read off the table (less the
store's own inputs and TLS, which the store's ``validate`` judges against the endpoint)."""

BASE: Final = {
    "inject": "true",
    "source": "consul",
    "endpoint": "http://consul:8500",
    "key": "myapp/config.json",
    "path": "/config/rendered.toml",
    "mode": "sidecar",
    f"source.{NAMED}": "consul",
    f"endpoint.{NAMED}": "http://consul:8500",
    f"key.{NAMED}": "myapp/cache.json",
    f"path.{NAMED}": "/config/cache.json",
}
VOLUME: Final = {
    "source": "consul",
    "endpoint": "http://consul:8500",
    "key": "myapp/config.json",
    "path": "rendered.toml",
}

KNOWN_DISAGREEMENTS: Final = (
    ("file-mode", " 0640"),
    ("file-mode", "0O640"),
    ("history", "0"),
)
"""Values the agent's own parser once took while admission refused them."""

VALUES: Final = (
    " 0640", "0O640", "0o640", "0640", "640", "0", "1", "5", "10", "11", "15", "-1", "1.5",
    "90s", "6h", "0s", "7777", "0044", " 15", "15 ", "true", "false", "warn", "repair",
    "allow-cached", "require-fresh", "retain", "remove", "bogus", "off", "5/10", "1/0",
    "8388608", "lots", "a", "db", "\uff11", "x" * 40,
)  # fmt: skip
"""Texts that sit on some row's edge (octal spellings, zero, signs, units, words)."""


def values() -> st.SearchStrategy[str]:
    return st.sampled_from(VALUES) | st.text(alphabet="0123456789oO smhd-/.x", max_size=6)


def annotation_sets() -> st.SearchStrategy[dict[str, str]]:
    """1-4 rows set on the default render or (per-render rows) on the named one."""
    keys = [row.name for row in ROWS] + [f"{row.name}.{NAMED}" for row in ROWS if row.per_render]
    return st.dictionaries(st.sampled_from(keys), values(), min_size=1, max_size=4)


Field = tuple[str, str | None]
"""A contract field: the row's name and the render it was set on (``None``: the default)."""


def _pod(annotations: Mapping[str, str]) -> dict[str, object]:
    full = {annotation(k) if "/" not in k else k: v for k, v in {**BASE, **annotations}.items()}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app", "annotations": full},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }


def webhook(annotations: Mapping[str, str]) -> Field | None:
    """``None`` when admitted, else the field the refusal names (as data)."""
    try:
        plan, _ = parse_pod(_pod(annotations), parse_installation({}))
        assert plan is not None
        check_agent_args(plan, agent_containers(plan))
    except Refusal as refusal:
        refused = refusal
    else:
        return None
    assert refused.field is not None, f"a refusal without its field: {refused.message}"
    split = split_key(refused.field)
    assert split is not None, refused.field
    return split


def _argv(render: str | None) -> list[str]:
    suffix = f".{render}" if render else ""
    return [
        "--source", BASE[f"source{suffix}"], "--endpoint", BASE[f"endpoint{suffix}"],
        "--key", BASE[f"key{suffix}"], "--out", BASE[f"path{suffix}"], "--watch", "15",
    ]  # fmt: skip


def _split(key: str) -> Field:
    base, _, suffix = key.partition(".")
    return base, suffix or None


def agent(annotations: Mapping[str, str]) -> set[Field]:
    """The fields the agent's parser refuses, each annotation under its row's flag on the
    command line of its render (one agent per render, as the patch writes them)."""
    refused: set[Field] = set()
    for key, value in annotations.items():
        name, render = _split(key)
        try:
            parse_args([*_argv(render), REGISTRY[name].flags[0], value], {})
        except UsageError as error:
            refused.add((error.refusal.field or "", render))
    return refused


def volume(annotations: Mapping[str, str], target: Path) -> set[Field] | None:
    """The fields the node agent refuses, each default-render value under its attribute;
    ``None`` when no annotation of the set is a volume attribute (nothing to compare). An
    empty attribute is an absent one to the kubelet's map, so it is not compared either."""
    refused: set[Field] = set()
    compared = False
    for key, value in annotations.items():
        name, render = _split(key)
        csi = REGISTRY[name].csi
        if render is not None or csi is None or not value:
            continue
        compared = True
        try:
            parse_volume(target, {**VOLUME, csi: value}, {})
        except VolumeRefused as error:
            refused.add((error.field or "", None))
    return refused if compared else None


@dataclass(frozen=True)
class Verdicts:
    webhook: Field | None
    agent: set[Field]
    volume: set[Field] | None


def verdicts(annotations: Mapping[str, str], target: Path) -> Verdicts:
    return Verdicts(webhook(annotations), agent(annotations), volume(annotations, target))


def check(annotations: Mapping[str, str], target: Path) -> None:
    """The property: one verdict, and a refusal's field refused by every front end."""
    seen = verdicts(annotations, target)
    fields = {(_split(key)[0], _split(key)[1]) for key in annotations}
    assert seen.agent <= fields, (annotations, seen)  # each refusal names the flag's own row
    assert (seen.webhook is None) == (not seen.agent), (annotations, seen)
    if seen.webhook is not None:
        assert seen.webhook in seen.agent, (annotations, seen)
    if seen.volume is not None:
        volume_rows = {
            (name, None)
            for key, value in annotations.items()
            for name, render in [_split(key)]
            if render is None and REGISTRY[name].csi and value
        }
        assert seen.volume == seen.agent & volume_rows, (annotations, seen)
