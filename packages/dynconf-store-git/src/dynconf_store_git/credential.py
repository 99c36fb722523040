"""Who the git store says it is: the credential, its identity, and its fingerprint.

A credential's *identity* (method, username, where the secret comes from) names the cache
directory, so a rotated token reuses its clone; its *fingerprint* (a hash of the secret as
read now) is what a refusal is remembered by, so a refused credential is never sent again
while a replaced one (a rotated token file, a new key) is tried at once.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dynconf.errors import Origin, RemoteError
from dynconf.stores import Credential as StoreCredential
from dynconf.stores import credential_from_file, read_credential

__all__ = ["DEFAULT_USERNAME", "Credential"]

DEFAULT_USERNAME: Final = "x-access-token"
"""The username half of token basic auth; GitHub documents it, other hosts ignore it."""


@dataclass(frozen=True)
class Credential:
    """One of ``anonymous``, ``token``, ``ssh`` (the ssh agent) or ``ssh-key``.

    ``token`` is the token slot's value; ``token_path`` a file re-read at every check
    (a rotated token is picked up without a rebuild). ``repr`` never shows a secret.
    """

    method: str
    username: str = DEFAULT_USERNAME
    token: StoreCredential | None = None
    token_path: str | None = None
    ssh_key: str | None = None

    @property
    def uses_http_auth(self) -> bool:
        return self.method == "token"

    @property
    def uses_ssh(self) -> bool:
        return self.method in ("ssh", "ssh-key")

    def identity(self) -> str:
        """What distinguishes one clone from another: never the secret itself."""
        source = self.token_path or ("slot" if self.token else "")
        return f"{self.method}\0{self.username}\0{source}\0{self.ssh_key or ''}"

    def secret(self, describe: str) -> str | None:
        """The token as it is now (the file re-read each call), or None for other methods."""
        if self.method != "token":
            return None
        if self.token_path:
            try:
                value = credential_from_file(self.token_path).strip()
            except OSError as exc:
                raise RemoteError(
                    f"{describe}: the token file {self.token_path} cannot be read "
                    f"({exc.strerror}); mount it or fix --auth-token-path",
                    origin=Origin.remote(describe),
                ) from None
        else:
            value = (read_credential(self.token) or "").strip()
        if not value:
            raise RemoteError(
                f"{describe}: the token is empty; fill the token slot or the token file",
                origin=Origin.remote(describe),
            )
        return value

    def authorization(self, secret: str) -> str:
        """The HTTP basic ``Authorization`` header value for ``secret``."""
        pair = f"{self.username}:{secret}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    def fingerprint(self, secret: str | None) -> str:
        """A digest standing for "this exact credential", compared after a refusal."""
        digest = hashlib.sha256(self.identity().encode())
        if secret is not None:
            digest.update(b"\0" + secret.encode())
        if self.ssh_key:
            try:
                digest.update(b"\0" + Path(self.ssh_key).read_bytes())
            except OSError:
                digest.update(b"\0unreadable")
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"Credential(method={self.method!r}, username={self.username!r})"
