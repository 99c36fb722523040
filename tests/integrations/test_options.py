"""Every web adapter takes one typed set of options (``_common.Options``), checked once."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette

from dynconf import DynamicConfig
from dynconf.integrations._common import wire
from dynconf.integrations.starlette import setup


def test_an_unknown_adapter_keyword_is_a_type_error_naming_it() -> None:
    config = DynamicConfig(None, "app").set_default("a", 1)
    with pytest.raises(TypeError, match=r"'mount_route'; the options are .*mount_routes"):
        setup(Starlette(), config, mount_route=False)  # type: ignore[call-arg]


def test_mount_routes_false_wires_a_lifecycle_and_no_routes() -> None:
    config = DynamicConfig(None, "app").set_default("a", 1)
    lifecycle, routes = wire(config, (), {"mount_routes": False, "watch": False})
    assert routes is None and lifecycle.configs == (config,)


def test_route_options_reach_the_routes_and_follow_options_the_lifecycle() -> None:
    config = DynamicConfig(None, "app").set_default("a", 1)
    lifecycle, routes = wire(config, (), {"prefix": "/ops", "metrics": False, "watch": False})
    assert routes == {"prefix": "/ops", "metrics": False}
    assert not lifecycle.started
