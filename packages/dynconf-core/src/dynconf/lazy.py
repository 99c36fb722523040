"""Names a package exports but imports only when first used (one home for the pattern).

Plugin discovery imports every store package, and ``import dynconf`` must stay cheap: an agent
that renders from one store must not pay for another's client library, nor for pydantic or
jinja2 before it needs them. A package lists its heavy names once and sets::

    __getattr__ = lazy_attributes(globals(), {"ConsulSource": "dynconf_store_consul.source"})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(namespace: dict[str, Any], names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``names[name]`` on first use and keeping the value."""
    module_name = namespace.get("__name__", "?")

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
