"""``ConfigServer(...)``: the configserver store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``CONFIG_SERVER_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import StoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["ConfigServer"]


class ConfigServer(StoreSource):
    """One ``<application>/<profile>`` document of a config server.

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "configserver"

    def __init__(
        self,
        endpoint: str,
        key: str,
        *,
        auth: str | None = None,
        token: Credential | None = None,
        auth_token_path: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec(
                source="config-server",
                endpoint=endpoint,
                key=key,
                auth=auth,
                token=token,
                auth_token_path=auth_token_path,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(), **(extra or {})},
            )
        )
