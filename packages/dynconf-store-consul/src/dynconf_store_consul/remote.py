"""``Consul(...)``: the consul store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``CONSUL_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dynconf.remote import StoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["Consul"]


class Consul(StoreSource):
    """One Consul KV key, or several read in one transaction.

    ``key`` may be a list: several keys read at one instant and merged as layers, later
    keys winning (the binding's ``Git(url, [...])`` spelling).

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "consul"

    def __init__(
        self,
        endpoint: str,
        key: str | Sequence[str],
        *,
        token: Credential | None = None,
        auth: str | None = None,
        auth_mount: str | None = None,
        auth_token_path: str | None = None,
        datacenter: str | None = None,
        format: str | None = None,
        wait: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec(
                source="consul",
                endpoint=endpoint,
                key=key if isinstance(key, str) else (list(key) or [""])[0],
                keys=() if isinstance(key, str) else tuple(key),
                token=token,
                auth=auth,
                auth_mount=auth_mount,
                auth_token_path=auth_token_path,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={
                    **settings(datacenter=datacenter, format=format, wait=wait),
                    **(extra or {}),
                },
            )
        )
