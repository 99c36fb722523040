"""Hook implementations: the ``vault`` store type (auth table, refusals, build).

Discovery imports this module and nothing heavier: hvac and requests are imported by
:meth:`VaultStoreType.build`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from dynconf.errors import Refusal
from dynconf.plugins import hookimpl
from dynconf.store_http import HTTP_SETTINGS
from dynconf.stores import (
    AuthMethod,
    StoreInput,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
)

if TYPE_CHECKING:
    from dynconf_store_vault.source import VaultSource

__all__ = ["AUTH_METHODS", "VAULT_STORE", "VaultStoreType", "dynconf_stores"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

AUTH_METHODS: Final[Mapping[str, AuthMethod]] = {
    "token": AuthMethod("token", ("token",), "a Vault token from the token slot"),
    "kubernetes": AuthMethod(
        "kubernetes",
        ("auth_role",),
        "the pod's service-account JWT (re-read at every login) traded for a role's token",
    ),
    "approle": AuthMethod(
        "approle", ("auth_role", "password"), "role id in --auth-role, secret id as password"
    ),
    "jwt": AuthMethod(
        "jwt", (), "a JWT from the token slot or --auth-token-path, optional --auth-role"
    ),
    "userpass": AuthMethod("userpass", ("auth_username", "password"), "username + password"),
    "ldap": AuthMethod("ldap", ("auth_username", "password"), "directory username + password"),
    "cert": AuthMethod("cert", ("tls.cert_file",), "the TLS client certificate itself"),
}

# Which optional inputs each method reads; any other one set is refused, never ignored.
_USES: Final = {
    "token": frozenset(),
    "kubernetes": frozenset({"auth_mount", "auth_role", "auth_token_path"}),
    "approle": frozenset({"auth_mount", "auth_role"}),
    "jwt": frozenset({"auth_mount", "auth_role", "auth_token_path"}),
    "userpass": frozenset({"auth_mount", "auth_username"}),
    "ldap": frozenset({"auth_mount", "auth_username"}),
    "cert": frozenset({"auth_mount", "auth_role"}),
}
_OPTIONAL: Final = ("auth_mount", "auth_role", "auth_username", "auth_token_path")


class VaultStoreType(StoreTypeBase):
    """Vault (and OpenBao): KV v2 by metadata version, or a dynamic engine with leases."""

    constructor = "dynconf_store_vault.remote:Vault"
    """The typed Python constructor (``from dynconf.remote import Vault``)."""

    name = "vault"
    settings = HTTP_SETTINGS
    inputs = (
        StoreInput("namespace", summary="a Vault Enterprise namespace"),
        StoreInput("dynamic", "switch", summary="a dynamic secret with a lease"),
    )
    capability = WatchCapability.CONDITIONAL
    auth_methods = AUTH_METHODS
    default_auth = "token"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        refusals = _endpoint_refusals(spec)
        refusals.extend(_key_refusals(spec))
        method = spec.auth or "token"
        if method in _USES:
            for name in _OPTIONAL:
                if getattr(spec, name) and name not in _USES[method]:
                    refusals.append(
                        Refusal(name, f"{{field}} means nothing to vault auth {method}",
                                "remove it or choose the auth method it belongs to")
                    )  # fmt: skip
        if method == "jwt" and not (spec.token or spec.auth_token_path):
            refusals.append(
                Refusal("token", "vault auth jwt needs the JWT: {field} or "
                        "{field:auth_token_path} naming the file that holds it")
            )  # fmt: skip
        if spec.auth_username and "/" in spec.auth_username:
            refusals.append(Refusal("auth_username", "{field} cannot contain `/`",
                                    "name the user alone"))  # fmt: skip
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(Refusal("timeout", "{field} must be a positive number of seconds"))
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        from dynconf_store_vault.source import describe_spec

        return describe_spec(spec)

    def build(self, spec: StoreSpec) -> VaultSource:
        refusals = self.validate(spec)
        if refusals:
            from dynconf.errors import BackendError

            raise BackendError("; ".join(refusals))
        from dynconf_store_vault.source import VaultSource

        return VaultSource(spec)


def _endpoint_refusals(spec: StoreSpec) -> list[Refusal]:
    endpoint = spec.endpoint.strip()
    if not endpoint:
        return [Refusal("endpoint", "vault needs {field}",
                        "the server's address, e.g. https://vault.vault.svc:8200")]  # fmt: skip
    scheme, _, rest = endpoint.partition("://")
    if scheme not in ("http", "https") or not rest:
        return [
            Refusal("endpoint", "the vault endpoint must be an http:// or https:// address",
                    "e.g. https://vault.vault.svc:8200", words=True)
        ]  # fmt: skip
    refusals: list[Refusal] = []
    authority = rest.split("/", 1)[0]
    if "@" in authority:
        refusals.append(
            Refusal("endpoint", "the vault endpoint carries credentials", "remove them from "
                    "the address and pass the token or password through their Secrets",
                    words=True)
        )  # fmt: skip
    else:
        try:
            urlsplit(endpoint).port  # noqa: B018 - raises on a malformed port
        except ValueError:
            refusals.append(Refusal("endpoint", "the vault endpoint's port is not a number",
                                    "fix the address", words=True))  # fmt: skip
    if scheme == "http":
        tls = spec.tls
        named = [
            name
            for name, present in (
                ("tls.ca_file", tls.ca_file),
                ("tls.cert_file", tls.cert_file),
                ("tls.key_file", tls.key_file),
                ("tls.server_name", tls.server_name),
                ("tls.skip_verify", tls.skip_verify),
            )
            if present
        ]
        if named:
            refusals.append(
                Refusal(named[0], f"{{field:{'+'.join(named)}}} cannot apply to a plain "
                        "http:// vault endpoint", "use https:// or remove them")
            )  # fmt: skip
        if (spec.auth or "token") == "cert":
            refusals.append(
                Refusal("auth", "vault auth cert authenticates the TLS handshake, so it needs "
                        "an https:// endpoint", words=True)
            )  # fmt: skip
    return refusals


def _key_refusals(spec: StoreSpec) -> list[Refusal]:
    key = spec.key.strip()
    bare, question, _query = key.partition("?")
    mount, _, path = bare.strip("/").partition("/")
    refusals: list[Refusal] = []
    if "," in bare:
        refusals.append(Refusal("key", "vault reads one path per source",
                                "use a named render for a second path", words=True))  # fmt: skip
    if not mount or not path.strip("/"):
        if spec.dynamic:
            refusals.append(
                Refusal("key", "the dynamic vault key must be an engine path such as "
                        "database/creds/<role> or pki/issue/<role>", words=True)
            )  # fmt: skip
        else:
            refusals.append(
                Refusal("key", "the vault key must be <mount>/<path>", "e.g. secret/myapp for "
                        "the myapp secret on the secret KV mount", words=True)
            )  # fmt: skip
    if question and not spec.dynamic:
        refusals.append(
            Refusal("key", "`?` parameters in the vault key are only for dynamic engines "
                    "({field:dynamic})", "remove them from a KV key", words=True)
        )  # fmt: skip
    return refusals


VAULT_STORE: Final = VaultStoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [VAULT_STORE]
