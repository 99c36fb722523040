"""The consul store for dynconf: one Consul KV key as a document, watched by blocking queries.

The plugin module (``dynconf_store_consul.plugin``) is what discovery loads; the client
library (py-consul) is imported only when a source is built.
"""

from dynconf_store_consul.auth import LoginCredential, StaticCredential
from dynconf_store_consul.plugin import CONSUL_STORE, ConsulStoreType
from dynconf_store_consul.source import ConsulSource

__all__ = ["CONSUL_STORE", "ConsulSource", "ConsulStoreType", "LoginCredential", "StaticCredential"]
