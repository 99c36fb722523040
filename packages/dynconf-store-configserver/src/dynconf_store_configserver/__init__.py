"""The config-server store for dynconf, and (extra ``[server]``) the config server itself.

The client store (``dynconf_store_configserver.plugin`` / ``.source``) reads one
``<application>/<profile>`` document from a config server and follows it over server-sent
events. The server (``dynconf_store_configserver.server``, console script
``dynamic-config-server``) merges files, an environment prefix and any installed store into
those documents.
"""

from dynconf_store_configserver.plugin import CONFIG_SERVER_STORE, ConfigServerStoreType
from dynconf_store_configserver.source import ConfigServerSource

__all__ = ["CONFIG_SERVER_STORE", "ConfigServerSource", "ConfigServerStoreType"]
