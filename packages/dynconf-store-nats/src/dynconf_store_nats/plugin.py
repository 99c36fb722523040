"""The ``nats`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. Building imports nats-py; discovery does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from dynconf.errors import Refusal
from dynconf.plugins import hookimpl
from dynconf.stores import (
    AuthMethod,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    format_from_key,
    format_refusals,
    redact_url_list,
)

if TYPE_CHECKING:
    from dynconf_store_nats.source import NatsSource

__all__ = [
    "CREDENTIAL_MODES",
    "NATS_STORE",
    "NatsKey",
    "NatsStoreType",
    "credential_mode",
    "dynconf_stores",
    "parse_key",
]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

CREDENTIAL_MODES: Final[Mapping[str, AuthMethod]] = {
    "creds": AuthMethod(
        "creds",
        ("auth_token_path",),
        "a .creds file (user JWT + nkey seed, as `nsc` writes it) named by --auth-token-path, "
        "read at every connect",
    ),
    "token": AuthMethod(
        "token", ("token",), "the server's authorization token, from the token slot"
    ),
    "anonymous": AuthMethod("anonymous", (), "no credential: a server without authorization"),
}
"""How a nats source presents itself, in precedence order. NATS takes no ``--auth``: the
agent contract picks the mode from what is set — a .creds file, else a token, else none."""


def credential_mode(spec: StoreSpec) -> str:
    """``creds``, ``token`` or ``anonymous``: the first of them whose input is set."""
    if spec.auth_token_path:
        return "creds"
    if spec.token:
        return "token"
    return "anonymous"


SETTINGS: Final = ("format",)
"""The ``extra`` keys a nats spec accepts."""

_SCHEMES: Final = ("nats", "tls")
_BUCKET: Final = re.compile(r"^[a-zA-Z0-9_-]+$")
_KV_KEY: Final = re.compile(r"^[-/_=.a-zA-Z0-9]+$")


@dataclass(frozen=True, slots=True)
class NatsKey:
    """``<bucket>/<key>`` split at the first ``/``."""

    bucket: str
    key: str


def parse_key(text: str) -> NatsKey | Refusal:
    """The bucket and KV key, or the refusal that names the fix."""
    bucket, sep, key = text.strip().lstrip("/").partition("/")
    example = "e.g. config/myapp/settings.json (bucket config, key myapp/settings.json)"
    if not sep or not bucket or not key:
        return Refusal("key", f"the nats key {text} must be <bucket>/<key>", example,
                       words=True)  # fmt: skip
    if not _BUCKET.match(bucket):
        return Refusal("key", f"the nats bucket {bucket} is not a KV bucket name (letters, "
                       "digits, `-`, `_`)", example, words=True)  # fmt: skip
    if "*" in key or ">" in key:
        return Refusal("key", f"the nats key {key} is a wildcard", "a nats source reads one "
                       "key, so name it exactly", words=True)  # fmt: skip
    if not _KV_KEY.match(key) or key.startswith(".") or key.endswith("."):
        return Refusal("key", f"the nats key {key} is not a valid KV key (letters, digits, "
                       "`-`, `/`, `_`, `=`, `.`, not starting or ending with `.`)",
                       "rename it", words=True)  # fmt: skip
    return NatsKey(bucket, key)


def server_refusals(endpoint: str) -> list[Refusal]:
    """Refusals for the server list: ``nats://`` or ``tls://`` URLs, comma separated."""
    if not endpoint.strip():
        return [
            Refusal("endpoint", "nats needs {field} (or DYNAMIC_CONFIG_AGENT_ENDPOINT)",
                    "the server URL, e.g. nats://nats.infra.svc:4222 (several, comma "
                    "separated)")
        ]  # fmt: skip
    refusals: list[Refusal] = []
    for part in (p.strip() for p in endpoint.split(",")):
        shown_part = redact_url_list(part)
        scheme, sep, rest = part.partition("://")
        if not sep or scheme.lower() not in _SCHEMES:
            refusals.append(
                Refusal("endpoint", f"the nats server {shown_part} needs a nats:// or tls:// "
                        "scheme", "e.g. nats://nats.infra.svc:4222", words=True)
            )  # fmt: skip
            continue
        authority, _, path = rest.partition("/")
        if "@" in authority:
            refusals.append(
                Refusal("endpoint", f"the nats server {shown_part} carries a credential",
                        "remove it from the URL and give it as the token (the token slot) or "
                        "a .creds file ({field:auth_token_path})", words=True)
            )  # fmt: skip
            continue
        if not authority or authority.startswith(":"):
            refusals.append(Refusal("endpoint", f"the nats server {shown_part} names no host",
                                    "write nats://host:port", words=True))  # fmt: skip
        elif path:
            refusals.append(Refusal("endpoint", f"the nats server {shown_part} has a path",
                                    "give only nats://host:port", words=True))  # fmt: skip
    return refusals


class NatsStoreType(StoreTypeBase):
    """NATS JetStream KV: one key of an existing bucket is one document; a push watch."""

    constructor = "dynconf_store_nats.remote:Nats"
    """The typed Python constructor (``from dynconf.remote import Nats``)."""

    name = "nats"
    settings = SETTINGS
    capability = WatchCapability.PUSH
    auth_methods: Mapping[str, AuthMethod] = {}
    default_auth = None

    def credential_hint(self) -> str:
        return "a .creds file ({field:auth_token_path}), else the token, else none"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        refusals = server_refusals(spec.endpoint)
        key = parse_key(spec.key)
        if isinstance(key, Refusal):
            refusals.append(key)
        else:
            refusals.extend(self._format_refusals(spec, key))
        refusals.extend(self._auth_refusals(spec))
        refusals.extend(self._tls_refusals(spec))
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(
                Refusal("timeout", "{field} must be a positive number of seconds for nats")
            )
        return refusals

    @staticmethod
    def _format_refusals(spec: StoreSpec, key: NatsKey) -> list[Refusal]:
        return format_refusals("nats", key.key, spec.extra.get("format"), noun="key")

    @staticmethod
    def _auth_refusals(spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        for name in ("auth_role", "auth_mount", "auth_username"):
            if getattr(spec, name):
                refusals.append(
                    Refusal(name, "nats takes no {field}",
                            "remove it (a .creds file or a token signs in)")
                )  # fmt: skip
        if spec.password:
            refusals.append(
                Refusal("password", "nats takes no password", "give a token (the token slot) "
                        "or a .creds file ({field:auth_token_path})", words=True)
            )  # fmt: skip
        return refusals

    @staticmethod
    def _tls_refusals(spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        for name, value in (("tls.ca_file", spec.tls.ca_file),
                            ("tls.cert_file", spec.tls.cert_file),
                            ("tls.key_file", spec.tls.key_file)):  # fmt: skip
            if value and "-----BEGIN" in value:
                refusals.append(
                    Refusal(name, "{field} holds PEM text", "nats refuses certificate bytes "
                            "rather than ignore them: mount the material as a file and give "
                            "its path")
                )  # fmt: skip
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        key = parse_key(spec.key)
        servers = redact_url_list(spec.endpoint)
        if isinstance(key, Refusal):
            return f"nats {servers} key {spec.key}"
        return f"nats {servers} bucket {key.bucket} key {key.key}"

    def build(self, spec: StoreSpec) -> NatsSource:
        """A source for ``spec`` (no I/O); refuses (BackendError) what :meth:`validate` refuses."""
        from dynconf_store_nats.connection import DEFAULT_TIMEOUT, ConnectSettings, load_client
        from dynconf_store_nats.source import NatsSource

        description = self.admit(spec)
        key = parse_key(spec.key)
        assert isinstance(key, NatsKey)
        mode = credential_mode(spec)
        settings = ConnectSettings(
            servers=tuple(p.strip() for p in spec.endpoint.split(",")),
            token=spec.token if mode == "token" else None,
            creds_file=spec.auth_token_path if mode == "creds" else None,
            tls=spec.tls,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            description=description,
        )
        format_name = (spec.extra.get("format") or format_from_key(key.key) or "").lower()
        load_client()
        return NatsSource(settings, key.bucket, key.key, format_name, max_bytes=spec.max_bytes)


NATS_STORE: Final = NatsStoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [NATS_STORE]
