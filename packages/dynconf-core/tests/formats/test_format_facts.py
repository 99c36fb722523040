"""Facts a format owns are asked of the format registry, never re-listed elsewhere.

A format a plugin adds is discovered by ``discover(name, dirs)``, named by a store key's
extension and accepted by a store's ``format=`` setting, with no edit outside the plugin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynconf import DynamicConfig
from dynconf.formats import BUILTIN_FORMATS
from dynconf.plugins import FormatType, Registry, reset_default_registry, use_registry
from dynconf.stores import flag_spelling, format_from_key, format_refusals

JSON5ISH = FormatType(
    name="jsonish", extensions=("jsonish",), parse=lambda text, origin: json.loads(text)
)


@pytest.fixture
def registry_with_plugin_format() -> Iterator[Registry]:
    registry = Registry()
    for fmt in (*BUILTIN_FORMATS, JSON5ISH):
        registry.formats[fmt.name] = fmt
        for ext in fmt.extensions:
            registry.extensions[ext] = fmt.name
    use_registry(registry)
    yield registry
    reset_default_registry()


def test_discovery_tries_the_built_in_extensions_in_the_contract_order() -> None:
    registry = Registry()
    for fmt in BUILTIN_FORMATS:
        registry.formats[fmt.name] = fmt

    assert registry.discovery_extensions() == ("toml", "json", "yaml", "yml", "ini", "properties")


def test_a_plugin_format_is_discovered_after_the_built_ins(
    registry_with_plugin_format: Registry, tmp_path: Path
) -> None:
    (tmp_path / "app.jsonish").write_text('{"app": {"port": 9}}')

    config = DynamicConfig(key="app").discover("app", [tmp_path])

    assert registry_with_plugin_format.discovery_extensions()[-1] == "jsonish"
    assert config.load() == {"port": 9}


def test_a_store_key_names_a_plugin_format(registry_with_plugin_format: Registry) -> None:
    assert format_from_key("prod/app.jsonish") == "jsonish"
    assert format_refusals("consul", "prod/app", "jsonish") == []


def test_a_format_no_plugin_provides_is_refused_with_the_installed_ones(
    registry_with_plugin_format: Registry,
) -> None:
    [data] = format_refusals("s3", "prod/app.json", "hcl", noun="object")
    refusal = data.render(flag_spelling)

    assert refusal.startswith("format=hcl is not a format s3 documents can be stored in")
    assert refusal.endswith("json, toml, yaml, ini, properties, env, jsonish")
