"""The etcd endpoint and the spec rules that need no client library.

Pure functions: the plugin's ``validate`` and the source's constructor both call them, so a
refusal reads the same at admission, at agent start and at build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from dynconf.stores import StoreSpec, format_from_key, redact_url

__all__ = ["DEFAULT_PORT", "Endpoint", "parse_endpoint", "spec_refusals"]

DEFAULT_PORT: Final = 2379


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the gateway listens: ``http`` or ``https``, a host and a port."""

    scheme: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


def parse_endpoint(endpoint: str) -> tuple[Endpoint | None, list[str]]:
    """The endpoint, or the refusals that explain why it cannot be used.

    Messages show the endpoint only in redacted form: an address pasted with a password in
    it must not leak through its own parse error.
    """
    shown = redact_url(endpoint)
    if not endpoint:
        return None, [
            "etcd needs --endpoint: the gateway address, e.g. https://etcd.infra.svc:2379"
        ]
    if "," in endpoint:
        return None, [
            f"etcd endpoint {shown} names several addresses; name one address (a Service "
            "in front of the members)"
        ]
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        return None, [f"etcd endpoint {shown} is not a URL; write it as http(s)://host:port"]
    problems: list[str] = []
    if parts.scheme not in ("http", "https"):
        problems.append(
            f"etcd endpoint {shown} must start with http:// or https://; the gateway speaks HTTP"
        )
    if not parts.hostname:
        problems.append(f"etcd endpoint {shown} has no host; write it as http(s)://host:port")
    if parts.username is not None or parts.password is not None:
        problems.append(
            f"etcd endpoint {shown} carries credentials; put the user in --auth-username "
            "and the password in its Secret (DYNAMIC_CONFIG_AGENT_PASSWORD)"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        problems.append(
            f"etcd endpoint {shown} has a path or query; name only scheme, host and port"
        )
    if problems or parts.hostname is None:
        return None, problems
    return Endpoint(parts.scheme, parts.hostname, port or DEFAULT_PORT), []


def _key_refusals(spec: StoreSpec, key: str) -> list[str]:
    if not key:
        return ["etcd needs --key: the key that holds the document"]
    if "," in key:
        return [
            "etcd reads one key per source; merge several documents with a template or the "
            "config server"
        ]
    if format_from_key(key) is None and "format" not in spec.extra:
        return [
            f"the etcd key {key} has no extension naming its format; name the key "
            "with .json, .toml, .yaml, .ini, .properties or .env"
        ]
    return []


def spec_refusals(spec: StoreSpec) -> list[str]:
    """Every etcd-specific refusal for ``spec`` (the shared ones live in the base)."""
    refusals: list[str] = []
    for key in spec.keys or (spec.key,):
        refusals.extend(_key_refusals(spec, key))
    endpoint, problems = parse_endpoint(spec.endpoint)
    refusals.extend(problems)
    if spec.auth_username and not spec.password:
        refusals.append(
            "etcd --auth-username needs a password (DYNAMIC_CONFIG_AGENT_PASSWORD, from the "
            "password Secret)"
        )
    if spec.password and not spec.auth_username:
        refusals.append(
            "etcd got a password but no --auth-username; name the etcd user it belongs to"
        )
    if spec.token:
        refusals.append(
            "etcd takes no token; authenticate with --auth-username and a password, or a "
            "client certificate"
        )
    for value, flag in (
        (spec.auth_role, "--auth-role"),
        (spec.auth_mount, "--auth-mount"),
        (spec.auth_token_path, "--auth-token-path"),
    ):
        if value:
            refusals.append(
                f"etcd has no login method that takes {flag}; remove it (etcd speaks "
                "username/password and client certificates)"
            )
    if endpoint is not None and not endpoint.tls and spec.tls.configured:
        refusals.append(
            "TLS settings (--ca, --tls-*) on an http:// etcd endpoint would be ignored; use "
            "https:// or remove them"
        )
    return refusals
