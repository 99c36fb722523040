"""``Firestore(...)``: the firestore store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``FIRESTORE_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import StoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["Firestore"]


class Firestore(StoreSource):
    """One Firestore document's fields (``collection/document``).

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "firestore"

    def __init__(
        self,
        endpoint: str,
        key: str,
        *,
        auth: str | None = None,
        token: Credential | None = None,
        api_url: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec.from_inputs(
                source="firestore",
                endpoint=endpoint,
                key=key,
                auth=auth,
                token=token,
                api_url=api_url,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(), **(extra or {})},
            )
        )
