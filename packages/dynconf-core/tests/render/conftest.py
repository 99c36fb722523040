"""A process registry with only the built-in formats and filters, for every render test.

Rendering looks formats and filters up in the process registry; building it from the
built-ins keeps these tests independent of whichever store plugins are installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dynconf.formats import BUILTIN_FORMATS
from dynconf.plugins import Registry, reset_default_registry, use_registry
from dynconf.template import BUILTIN_FILTERS


def build_registry(extra_filters: dict[str, Callable[..., Any]] | None = None) -> Registry:
    registry = Registry()
    for fmt in BUILTIN_FORMATS:
        registry.formats[fmt.name] = fmt
        for ext in fmt.extensions:
            registry.extensions[ext] = fmt.name
    registry.filters.update(BUILTIN_FILTERS)
    registry.filters.update(extra_filters or {})
    return registry


@pytest.fixture(autouse=True)
def builtin_registry() -> Iterator[Registry]:
    registry = build_registry()
    use_registry(registry)
    yield registry
    reset_default_registry()


@pytest.fixture
def install_filters() -> Callable[[dict[str, Callable[..., Any]]], None]:
    """Install a process registry that also holds the given plugin filters."""

    def install(filters: dict[str, Callable[..., Any]]) -> None:
        use_registry(build_registry(filters))

    return install
