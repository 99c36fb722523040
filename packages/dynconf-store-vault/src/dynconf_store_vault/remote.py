"""``Vault(...)``: the vault store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``VAULT_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import StoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["Vault"]


class Vault(StoreSource):
    """One Vault KV v2 secret (``mount/path``) or, with ``dynamic=True``, a dynamic secret.

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "vault"

    def __init__(
        self,
        addr: str,
        path: str,
        *,
        auth: str | None = None,
        token: Credential | None = None,
        password: Credential | None = None,
        auth_mount: str | None = None,
        auth_role: str | None = None,
        auth_username: str | None = None,
        auth_token_path: str | None = None,
        namespace: str | None = None,
        dynamic: bool = False,
        section: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec.from_inputs(
                source="vault",
                endpoint=addr,
                key=path,
                auth=auth,
                token=token,
                password=password,
                auth_mount=auth_mount,
                auth_role=auth_role,
                auth_username=auth_username,
                auth_token_path=auth_token_path,
                namespace=namespace,
                dynamic=dynamic,
                section=section,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(), **(extra or {})},
            )
        )
