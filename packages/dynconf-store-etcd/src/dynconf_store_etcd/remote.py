"""``Etcd(...)``: the etcd store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``ETCD_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dynconf.remote import StoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["Etcd"]


class Etcd(StoreSource):
    """One etcd key through the v3 gateway, or several read at one revision.

    ``key`` may be a list: several keys read at one instant and merged as layers, later
    keys winning (the binding's ``Git(url, [...])`` spelling).

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "etcd"

    def __init__(
        self,
        endpoint: str,
        key: str | Sequence[str],
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
                key=key if isinstance(key, str) else (list(key) or [""])[0],
                keys=() if isinstance(key, str) else tuple(key),
                auth_username=username,
                password=password,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(format=format), **(extra or {})},
            )
        )
