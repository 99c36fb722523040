"""The chart's README is its values reference: every value ``values.yaml`` holds has a row with
its default, and every value the README names is one the chart accepts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

from tests.chart.support import CHART

README = (CHART / "README.md").read_text()
VALUES: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())

ROW = re.compile(r"^\| `([^`]+)` \| `([^`]*)` \|", re.MULTILINE)
"""A reference row: ``| `value` | `default` | meaning |``."""
CODE_SPAN = re.compile(r"`([^`\n]+)`")
SET_FLAG = re.compile(r"--set(?:-file|-string)? ([^\s=]+)=")
VALUE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*")


def _leaves(tree: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted path and default of every value that is not a non-empty map."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _leaves(value, path + ".")
        else:
            yield path, value


def _spelled(default: Any) -> str:
    """A default as the README's default column spells it."""
    if isinstance(default, str):
        return default or '""'
    return json.dumps(default)


def _accepts(schema: dict[str, Any], path: list[str]) -> bool:
    """Whether the chart's schema has a value at ``path``, or a free-form map above it."""
    node = schema
    for key in path:
        properties = node.get("properties")
        if properties is None:
            kinds = [node.get("type"), *(alt.get("type") for alt in node.get("oneOf", []))]
            return "object" in kinds and node.get("additionalProperties") is not False
        if key not in properties:
            return False
        node = properties[key]
    return True


def _named() -> set[str]:
    """Every value the README names: code spans and ``--set`` flags that start with a
    top-level value."""
    candidates = {span.split("=")[0] for span in CODE_SPAN.findall(README)}
    candidates |= set(SET_FLAG.findall(README))
    return {
        name
        for name in candidates
        if VALUE_NAME.fullmatch(name) and name.split(".")[0] in SCHEMA["properties"]
    }


def test_every_value_has_a_row_with_its_default() -> None:
    rows = dict(ROW.findall(README))

    missing = [path for path, _ in _leaves(VALUES) if path not in rows]
    wrong = {
        path: (rows[path], _spelled(default))
        for path, default in _leaves(VALUES)
        if path in rows and rows[path] != _spelled(default)
    }

    assert not missing, f"values without a README row: {missing}"
    assert not wrong, f"README defaults that are not values.yaml's (README, values): {wrong}"


def test_every_value_the_readme_names_exists() -> None:
    names = _named()

    unknown = sorted(name for name in names if not _accepts(SCHEMA, name.split(".")))

    assert "webhook.ownCert.caBundle" in names  # the scan sees the rows
    assert not unknown, f"the README names values the chart does not have: {unknown}"


def test_the_scan_catches_a_value_that_does_not_exist() -> None:
    assert not _accepts(SCHEMA, ["webhook", "tls", "mode"])
    assert not _accepts(SCHEMA, ["operator", "resources", "limit"])
    assert _accepts(SCHEMA, ["agent", "defaults", "perStore", "vault"])
    assert _accepts(SCHEMA, ["webhook", "objectSelector", "matchLabels"])
