"""The plugin API version: the range a plugin module declares against what this core provides.

In-process cases on modules made here; ``tests/tenth_store/test_plugin_api.py`` installs real
distributions built for other cores into a fresh virtualenv.
"""

from __future__ import annotations

from types import ModuleType

import pluggy
import pytest

import dynconf
from dynconf.plugins import (
    PLUGIN_API_VERSION,
    ApiRange,
    DynconfHookSpecs,
    LockEntry,
    Registry,
    api_refusal,
    hookimpl,
)

ENTRY = LockEntry("dynconf-store-x", "3.1.0", "x", "dynconf_store_x.plugin")


def _module(declared: object = None) -> ModuleType:
    module = ModuleType("dynconf_store_x.plugin")
    if declared is not None:
        module.DYNCONF_PLUGIN_API = declared  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize(
    ("text", "version", "allowed"),
    [
        (">=1.0,<2", "1.0", True),
        (">=1.0,<2", "1.7", True),
        (">=1.0,<2", "2.0", False),
        (">=1.2", "1.1", False),
        ("==1", "1.0", True),
        (">1.0, <=1.5", "1.5", True),
    ],
)
def test_a_range_allows_exactly_its_versions(text: str, version: str, allowed: bool) -> None:
    parsed = ApiRange.parse(text)
    assert parsed is not None
    assert parsed.allows(version) is allowed


@pytest.mark.parametrize("text", ["", "1.0", ">=one", "~=1.0", ">=1.0;<2", 1])
def test_what_is_not_a_range_parses_to_none(text: object) -> None:
    assert ApiRange.parse(text) is None


def test_the_core_provides_a_version_its_own_builtin_plugin_accepts() -> None:
    from dynconf import builtin

    assert (
        api_refusal(builtin, LockEntry("dynconf-core", dynconf.__version__, "builtin", "")) is None
    )
    assert PLUGIN_API_VERSION.count(".") == 1


def test_a_plugin_for_a_newer_core_names_both_versions_and_says_upgrade_the_core() -> None:
    refusal = api_refusal(_module(">=2.0,<3"), ENTRY)
    assert refusal is not None
    assert refusal.reason == (
        "the plugin `x` (dynconf-store-x 3.1.0) was written for plugin API >=2.0,<3 but "
        f"dynconf-core {dynconf.__version__} provides plugin API {PLUGIN_API_VERSION}; "
        "upgrade dynconf-core to a release that provides plugin API >=2.0,<3"
    )


def test_a_plugin_for_an_older_core_says_upgrade_the_plugin() -> None:
    refusal = api_refusal(_module(">=0.1,<1"), ENTRY)
    assert refusal is not None
    assert "was written for plugin API >=0.1,<1 but dynconf-core" in refusal.reason
    assert refusal.reason.endswith(
        f"upgrade dynconf-store-x to a release written for plugin API {PLUGIN_API_VERSION}"
    )


def test_a_plugin_without_a_declaration_is_told_what_to_declare() -> None:
    refusal = api_refusal(_module(), ENTRY)
    assert refusal is not None
    assert "declares no plugin API range" in refusal.reason
    assert f'DYNCONF_PLUGIN_API = ">={PLUGIN_API_VERSION},<2"' in refusal.reason


def test_a_malformed_declaration_is_refused_without_quoting_it() -> None:
    refusal = api_refusal(_module("latest please"), ENTRY)
    assert refusal is not None
    assert "latest please" not in refusal.reason
    assert "is not one" in refusal.reason


class _Raising:
    DYNCONF_PLUGIN_API = ">=1.0,<2"

    @hookimpl
    def dynconf_stores(self) -> list[object]:
        raise RuntimeError("a bug in the plugin")


class _Nonsense:
    DYNCONF_PLUGIN_API = ">=1.0,<2"

    @hookimpl
    def dynconf_formats(self) -> list[object]:
        return ["not a format"]


class _Good:
    DYNCONF_PLUGIN_API = ">=1.0,<2"

    @hookimpl
    def dynconf_template_filters(self) -> dict[str, object]:
        return {"shout": str.upper}

    @hookimpl
    def dynconf_stores(self) -> None:
        """None contributes nothing, as pluggy has always treated it."""


def test_a_plugin_whose_hook_raises_or_answers_nonsense_is_refused_alone() -> None:
    manager = pluggy.PluginManager("dynconf")
    manager.add_hookspecs(DynconfHookSpecs)
    registry = Registry(manager=manager)
    for name, plugin in (("raising", _Raising()), ("nonsense", _Nonsense()), ("good", _Good())):
        manager.register(plugin, name=name)
        registry.plugins.append(LockEntry(f"dist-{name}", "1.0.0", name, f"{name}.plugin"))
    registry._collect(manager)
    assert "shout" in registry.filters
    assert [e.name for e in registry.plugins] == ["good"]
    reasons = {r.name: r.reason for r in registry.refused}
    assert set(reasons) == {"raising", "nonsense"}
    assert "answered dynconf_stores with RuntimeError" in reasons["raising"]
    assert "a bug in the plugin" not in reasons["raising"]
    assert "answered dynconf_formats with TypeError" in reasons["nonsense"]
    assert manager.get_plugin("raising") is None
