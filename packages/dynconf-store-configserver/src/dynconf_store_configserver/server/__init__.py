"""The config server (install the ``[server]`` extra): many stores, one document per section.

:func:`create_app` builds the starlette app from validated :class:`Settings` (tests build it
without a process); :func:`load_settings` reads and validates the TOML file; :func:`main` is
the ``dynamic-config-server`` console script.
"""

from dynconf_store_configserver.server.app import create_app
from dynconf_store_configserver.server.main import build_server, main
from dynconf_store_configserver.server.settings import Settings, SettingsError, load_settings

__all__ = ["Settings", "SettingsError", "build_server", "create_app", "load_settings", "main"]
