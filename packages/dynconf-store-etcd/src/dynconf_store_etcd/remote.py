"""``Etcd(...)``: the etcd store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``ETCD_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import StoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["Etcd"]


class Etcd(StoreSource):
    """One etcd key through the v3 gateway (``keys=[...]``: several, read at one revision).

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "etcd"

    def __init__(
        self,
        endpoint: str,
        key: str,
        *,
        username: str | None = None,
        password: Credential | None = None,
        format: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec(
                source="etcd",
                endpoint=endpoint,
                key=key,
                auth_username=username,
                password=password,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(format=format), **(extra or {})},
            )
        )
