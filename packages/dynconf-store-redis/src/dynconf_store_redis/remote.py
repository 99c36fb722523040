"""``Redis(...)``: the redis store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``REDIS_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import StoreSource, settings
from dynconf.stores import StoreSpec, TlsSettings

__all__ = ["Redis"]


class Redis(StoreSource):
    """One Redis string key (credentials in the URL, as the agent takes them).

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "redis"

    def __init__(
        self,
        url: str,
        key: str,
        *,
        format: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec(
                source="redis",
                endpoint=url,
                key=key,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(format=format), **(extra or {})},
            )
        )
