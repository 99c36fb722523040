"""The ``consul`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. Building imports the client library; discovery does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from dynconf.errors import Refusal
from dynconf.limits import MAX_DOCUMENT_BYTES
from dynconf.plugins import hookimpl
from dynconf.store_http import HTTP_SETTINGS, HttpPolicy
from dynconf.stores import (
    SETTING,
    TLS_INPUTS,
    AuthMethod,
    StoreInput,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    credential_from_file,
    format_from_key,
    format_refusals,
    read_credential,
    redact_url,
)

if TYPE_CHECKING:
    from dynconf_store_consul.source import ConsulSource

__all__ = ["CONSUL_STORE", "ConsulStoreType", "dynconf_stores"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

AUTH_METHODS: Final[Mapping[str, AuthMethod]] = {
    "anonymous": AuthMethod(
        "anonymous", (), "no token: ACLs off, or a default policy that allows reads"
    ),
    "token": AuthMethod("token", ("token",), "an ACL token sent as X-Consul-Token"),
    "kubernetes": AuthMethod(
        "kubernetes",
        ("auth_mount",),
        "log in to a kubernetes-type auth method with the pod's service-account JWT",
    ),
    "jwt": AuthMethod(
        "jwt",
        ("auth_mount", "token"),
        "log in to a jwt-type auth method with the bearer from the token slot",
    ),
}

SETTINGS: Final = ("datacenter", "format", "wait", *HTTP_SETTINGS)
"""The ``extra`` keys a consul spec accepts."""

MAX_TXN_KEYS: Final = 64
"""Consul's limit on the operations of one transaction."""
_DURATION: Final = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)?$")
_DATACENTER: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def parse_wait(text: str) -> float | None:
    """A blocking-query wait in seconds (``90``, ``90s``, ``1.5m``, ``500ms``), or None."""
    match = _DURATION.match(text.strip())
    if match is None:
        return None
    number, unit = float(match.group(1)), match.group(2) or "s"
    return number * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


class ConsulStoreType(StoreTypeBase):
    """Consul KV: one key, one document; blocking queries as the push watch."""

    constructor = "dynconf_store_consul.remote:Consul"
    """The typed Python constructor (``from dynconf.remote import Consul``)."""

    name = "consul"
    settings = SETTINGS
    inputs = (StoreInput("keys", "list", summary="several keys read as one"),)
    capability = WatchCapability.PUSH
    auth_methods = AUTH_METHODS
    default_auth = "anonymous"

    def credential_hint(self) -> str:
        return "an ACL token or an auth-method login"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        from dynconf_store_consul.transport import parse_endpoint

        refusals: list[Refusal] = []
        endpoint = parse_endpoint(spec.endpoint)
        if isinstance(endpoint, Refusal):
            refusals.append(endpoint)
        elif endpoint.scheme == "http" and spec.tls.configured:
            refusals.append(
                Refusal("tls", f"TLS settings ({TLS_INPUTS}) need an https:// consul endpoint",
                        "change the scheme or remove them", words=True)
            )  # fmt: skip
        for each in spec.keys or (spec.key,):
            refusals.extend(
                self._key_refusals(spec if each == spec.key else replace(spec, key=each))
            )
        if len(spec.keys) > MAX_TXN_KEYS:
            refusals.append(
                Refusal("keys", f"consul reads at most {MAX_TXN_KEYS} keys in one transaction; "
                        f"{len(spec.keys)} were given", "merge some documents in the store",
                        words=True)
            )  # fmt: skip
        refusals.extend(self._setting_refusals(spec))
        refusals.extend(self._auth_refusals(spec))
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(
                Refusal("timeout", "{field} must be a positive number of seconds for consul")
            )
        return refusals

    @staticmethod
    def _key_refusals(spec: StoreSpec) -> list[Refusal]:
        key = spec.key.lstrip("/")
        if not key:
            return [Refusal("key", "consul needs {field}",
                            "a KV path with an extension, e.g. myapp/config.json")]  # fmt: skip
        if key.endswith("/"):
            return [
                Refusal("key", f"the consul key {spec.key} is a folder", "name one key holding "
                        "the document, e.g. myapp/config.json", words=True)
            ]  # fmt: skip
        if spec.extra.get("format") is None and format_from_key(key) is not None:
            return []
        return format_refusals("consul", spec.key, spec.extra.get("format"), noun="key")

    @staticmethod
    def _setting_refusals(spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        datacenter = spec.extra.get("datacenter")
        if datacenter is not None and not _DATACENTER.match(datacenter):
            refusals.append(
                Refusal(f"{SETTING}datacenter", "{field} must be a Consul datacenter name "
                        "(letters, digits, `-`, `_`, `.`)",
                        "leave it out to read the agent's own datacenter")
            )  # fmt: skip
        wait = spec.extra.get("wait")
        if wait is not None and (parse_wait(wait) or 0) < 1:
            refusals.append(
                Refusal(f"{SETTING}wait", f"wait={wait} is not a blocking-query wait of at "
                        "least 1 s", "write seconds (60, 60s) or minutes (5m), at most 10m",
                        words=True)
            )  # fmt: skip
        return refusals

    @staticmethod
    def _auth_refusals(spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        method = spec.auth or "anonymous"
        if spec.auth_role:
            refusals.append(
                Refusal("auth_role", "consul takes no {field}: its login names the auth method "
                        "only", "put the method's name in {field:auth_mount} and bind roles "
                        "with a binding rule")
            )  # fmt: skip
        if spec.auth_username:
            refusals.append(Refusal("auth_username", "consul takes no {field}", "remove it"))
        if spec.auth_mount and method not in ("kubernetes", "jwt"):
            refusals.append(
                Refusal("auth_mount", "{field} names a consul auth method to log in to",
                        "add {field:auth=kubernetes} or {field:auth=jwt}, or remove it")
            )  # fmt: skip
        if spec.auth_token_path and method != "kubernetes":
            refusals.append(
                Refusal("auth_token_path", "{field} is where {field:auth=kubernetes} reads the "
                        "service-account JWT", "add {field:auth=kubernetes} or remove it")
            )  # fmt: skip
        if spec.auth == "anonymous" and spec.token:
            refusals.append(
                Refusal("token", "{field:auth=anonymous} sends no token, but a token is set",
                        "use {field:auth=token}, or remove the token", words=True)
            )  # fmt: skip
        if method == "kubernetes" and spec.token:
            refusals.append(
                Refusal("token", "{field:auth=kubernetes} logs in with the service-account JWT "
                        "file, but a token is set", "remove it, or use {field:auth=jwt} to log "
                        "in with that token", words=True)
            )  # fmt: skip
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        key = ",".join(each.lstrip("/") for each in spec.keys or (spec.key,))
        datacenter = spec.extra.get("datacenter")
        where = f" dc {datacenter}" if datacenter else ""
        return f"consul {redact_url(spec.endpoint).rstrip('/')} kv/{key}{where}"

    def build(self, spec: StoreSpec) -> ConsulSource:
        """A source for ``spec``; refuses (BackendError) a spec :meth:`validate` refuses."""
        from dynconf_store_consul.auth import (
            SERVICE_ACCOUNT_TOKEN,
            Credential,
            LoginCredential,
            StaticCredential,
        )
        from dynconf_store_consul.source import DEFAULT_WAIT, ConsulSource
        from dynconf_store_consul.transport import (
            DEFAULT_TIMEOUT,
            Transport,
            answer_bound,
            parse_endpoint,
        )

        description = self.admit(spec)
        endpoint = parse_endpoint(spec.endpoint)
        assert not isinstance(endpoint, Refusal)
        key = spec.key.lstrip("/")
        format_name = (spec.extra.get("format") or format_from_key(key) or "").lower()
        credential: Credential
        if spec.auth == "kubernetes":
            assert spec.auth_mount
            path = spec.auth_token_path or SERVICE_ACCOUNT_TOKEN
            credential = LoginCredential(
                spec.auth_mount, lambda: credential_from_file(path), describe=description
            )
        elif spec.auth == "jwt":
            assert spec.auth_mount
            assert spec.token
            bearer = spec.token
            credential = LoginCredential(
                spec.auth_mount, lambda: read_credential(bearer) or "", describe=description
            )
        else:  # anonymous, token, or no --auth (the token when one is set)
            credential = StaticCredential(spec.token)
        transport = Transport(
            endpoint,
            spec.tls,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            describe=description,
            policy=HttpPolicy.from_settings(spec.extra),
            bound=answer_bound(
                spec.max_bytes or MAX_DOCUMENT_BYTES,
                [each.lstrip("/") for each in spec.keys] or [key],
            ),
        )
        wait = spec.extra.get("wait")
        return ConsulSource(
            transport,
            key,
            format_name,
            credential,
            description=description,
            datacenter=spec.extra.get("datacenter"),
            wait=(parse_wait(wait) or DEFAULT_WAIT) if wait else DEFAULT_WAIT,
            keys=[
                (
                    each.lstrip("/"),
                    (spec.extra.get("format") or format_from_key(each) or "").lower(),
                )
                for each in spec.keys
            ],
        )


CONSUL_STORE: Final = ConsulStoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [CONSUL_STORE]
