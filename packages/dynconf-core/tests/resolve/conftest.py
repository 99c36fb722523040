from __future__ import annotations

import pytest

from dynconf.plugins import Registry, default_registry


@pytest.fixture
def registry() -> Registry:
    return default_registry()
