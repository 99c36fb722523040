"""``S3(...)``: the s3 store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``S3_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import StoreSource, settings
from dynconf.stores import StoreSpec, TlsSettings

__all__ = ["S3"]


class S3(StoreSource):
    """One S3 object (``bucket/object``).

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "s3"

    def __init__(
        self,
        endpoint: str,
        key: str,
        *,
        api_url: str | None = None,
        format: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec.from_inputs(
                source="s3",
                endpoint=endpoint,
                key=key,
                api_url=api_url,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(format=format), **(extra or {})},
            )
        )
