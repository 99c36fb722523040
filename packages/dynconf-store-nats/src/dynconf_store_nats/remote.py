"""``Nats(...)``: the nats store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``NATS_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import AsyncStoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["Nats"]


class Nats(AsyncStoreSource):
    """One key of a JetStream KV bucket (``bucket/key``).

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "nats"

    def __init__(
        self,
        servers: str,
        key: str,
        *,
        token: Credential | None = None,
        auth_token_path: str | None = None,
        format: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec(
                source="nats",
                endpoint=servers,
                key=key,
                token=token,
                auth_token_path=auth_token_path,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(format=format), **(extra or {})},
            )
        )
