"""Formats tests: make the shared hypothesis strategies importable, isolate the registry."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from dynconf.formats import BUILTIN_FORMATS
from dynconf.plugins import Registry, reset_default_registry, use_registry


def builtin_registry() -> Registry:
    registry = Registry()
    for fmt in BUILTIN_FORMATS:
        registry.formats[fmt.name] = fmt
        for ext in fmt.extensions:
            registry.extensions[ext] = fmt.name
    return registry


@pytest.fixture
def registry() -> Iterator[Registry]:
    """A process registry holding exactly the built-in formats, forgotten afterwards."""
    built = builtin_registry()
    use_registry(built)
    try:
        yield built
    finally:
        reset_default_registry()
