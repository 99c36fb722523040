"""The consul store for dynconf: one Consul KV key as a document, watched by blocking queries.

The plugin module (``dynconf_store_consul.plugin``) is what discovery loads; the client
library (py-consul) is imported only when a source is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes
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

__getattr__ = lazy_attributes(
    globals(),
    {
        "LoginCredential": "dynconf_store_consul.auth",
        "StaticCredential": "dynconf_store_consul.auth",
        "ConsulSource": "dynconf_store_consul.source",
    },
)
"""Names imported on first use (:mod:`dynconf.lazy`): plugin discovery imports this
package, and an agent that uses another store must not pay for this one's client code."""
