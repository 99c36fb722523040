"""``Git(...)``: the git store as a typed constructor (the book's spelling).

Importing this module imports no client library; the source is built through
``GIT_STORE.build`` on its first read. Every argument is checked at
construction by the store type's own ``validate`` (the agent's rules, Python keywords).
"""

from __future__ import annotations

from collections.abc import Mapping

from dynconf.remote import StoreSource, settings
from dynconf.stores import Credential, StoreSpec, TlsSettings

__all__ = ["Git"]


class Git(StoreSource):
    """One file of a git ref's tree.

    Credentials (``token``, ``password``) may be callables: they are asked again at
    every login or connection. ``extra`` takes any other setting the agent accepts as
    ``name=value``.
    """

    store = "git"

    def __init__(
        self,
        url: str,
        key: str,
        *,
        ref: str | None = None,
        auth: str | None = None,
        token: Credential | None = None,
        auth_username: str | None = None,
        auth_token_path: str | None = None,
        ssh_key: str | None = None,
        format: str | None = None,
        timeout: float | None = None,
        tls: TlsSettings | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            StoreSpec.from_inputs(
                source="git",
                endpoint=url,
                key=key,
                ref=ref,
                auth=auth,
                token=token,
                auth_username=auth_username,
                auth_token_path=auth_token_path,
                ssh_key=ssh_key,
                timeout=timeout,
                tls=tls or TlsSettings(),
                extra={**settings(format=format), **(extra or {})},
            )
        )
