"""The consul store for dynconf: one Consul KV key as a document, watched by blocking queries.

The plugin module (``dynconf_store_consul.plugin``) is what discovery loads; the client
library (py-consul) is imported only when a source is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dynconf_store_consul.plugin import CONSUL_STORE, ConsulStoreType
from dynconf_store_consul.remote import Consul

if TYPE_CHECKING:
    from dynconf_store_consul.auth import LoginCredential, StaticCredential
    from dynconf_store_consul.source import ConsulSource

__all__ = [
    "Consul",
    "CONSUL_STORE",
    "ConsulSource",
    "ConsulStoreType",
    "LoginCredential",
    "StaticCredential",
]

_LAZY: dict[str, str] = {
    "LoginCredential": "dynconf_store_consul.auth",
    "StaticCredential": "dynconf_store_consul.auth",
    "ConsulSource": "dynconf_store_consul.source",
}
"""Names imported on first use: plugin discovery imports this package, and an agent that
uses another store must not pay for this one's client code."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(module), name)
