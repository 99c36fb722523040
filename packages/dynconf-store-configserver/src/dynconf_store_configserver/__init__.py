"""The config-server store for dynconf, and (extra ``[server]``) the config server itself.

The client store (``dynconf_store_configserver.plugin`` / ``.source``) reads one
``<application>/<profile>`` document from a config server and follows it over server-sent
events. The server (``dynconf_store_configserver.server``, console script
``dynamic-config-server``) merges files, an environment prefix and any installed store into
those documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes
from dynconf_store_configserver.plugin import CONFIG_SERVER_STORE, ConfigServerStoreType
from dynconf_store_configserver.remote import ConfigServer

if TYPE_CHECKING:
    from dynconf_store_configserver.source import ConfigServerSource

__all__ = ["ConfigServer", "CONFIG_SERVER_STORE", "ConfigServerSource", "ConfigServerStoreType"]

__getattr__ = lazy_attributes(
    globals(),
    {
        "ConfigServerSource": "dynconf_store_configserver.source",
    },
)
"""Names imported on first use (:mod:`dynconf.lazy`): plugin discovery imports this
package, and an agent that uses another store must not pay for this one's client code."""
