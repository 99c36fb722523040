"""The etcd endpoint and the spec rules that need no client library.

Pure functions: the plugin's ``validate`` and the source's constructor both call them, so a
refusal reads the same at admission, at agent start and at build.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from dynconf.errors import Refusal
from dynconf.stores import TLS_INPUTS, StoreSpec, format_from_key, redact_url

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


def parse_endpoint(endpoint: str) -> tuple[Endpoint | None, list[Refusal]]:
    """The endpoint, or the refusals that explain why it cannot be used.

    Messages show the endpoint only in redacted form: an address pasted with a password in
    it must not leak through its own parse error.
    """
    shown = redact_url(endpoint)
    if not endpoint:
        return None, [Refusal("endpoint", "etcd needs {field}",
                              "the gateway address, e.g. https://etcd.infra.svc:2379")]  # fmt: skip
    if "," in endpoint:
        return None, [
            Refusal("endpoint", f"etcd endpoint {shown} names several addresses", "name one "
                    "address (a Service in front of the members)", words=True)
        ]  # fmt: skip
    try:
        parts = urlsplit(endpoint)
        port = parts.port
    except ValueError:
        return None, [Refusal("endpoint", f"etcd endpoint {shown} is not a URL",
                              "write it as http(s)://host:port", words=True)]  # fmt: skip
    problems: list[Refusal] = []
    if parts.scheme not in ("http", "https"):
        problems.append(
            Refusal("endpoint", f"etcd endpoint {shown} must start with http:// or https://",
                    "the gateway speaks HTTP", words=True)
        )  # fmt: skip
    if not parts.hostname:
        problems.append(Refusal("endpoint", f"etcd endpoint {shown} has no host",
                                "write it as http(s)://host:port", words=True))  # fmt: skip
    if parts.username is not None or parts.password is not None:
        problems.append(
            Refusal("endpoint", f"etcd endpoint {shown} carries credentials", "put the user in "
                    "{field:auth_username} and the password in its Secret ({field:password})",
                    words=True)
        )  # fmt: skip
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        problems.append(
            Refusal("endpoint", f"etcd endpoint {shown} has a path or query",
                    "name only scheme, host and port", words=True)
        )  # fmt: skip
    if problems or parts.hostname is None:
        return None, problems
    return Endpoint(parts.scheme, parts.hostname, port or DEFAULT_PORT), []


def _key_refusals(spec: StoreSpec, key: str) -> list[Refusal]:
    if not key:
        return [Refusal("key", "etcd needs {field}", "the key that holds the document")]
    if "," in key:
        return [
            Refusal("key", "etcd reads one key per source", "merge several documents with a "
                    "template or the config server", words=True)
        ]  # fmt: skip
    if format_from_key(key) is None and "format" not in spec.extra:
        return [
            Refusal("key", f"the etcd key {key} has no extension naming its format", "name the "
                    "key with .json, .toml, .yaml, .ini, .properties or .env", words=True)
        ]  # fmt: skip
    return []


def spec_refusals(spec: StoreSpec) -> list[Refusal]:
    """Every etcd-specific refusal for ``spec`` (the shared ones live in the base)."""
    refusals: list[Refusal] = []
    for key in spec.keys or (spec.key,):
        refusals.extend(_key_refusals(spec, key))
    endpoint, problems = parse_endpoint(spec.endpoint)
    refusals.extend(problems)
    if spec.auth_username and not spec.password:
        refusals.append(
            Refusal("password", "etcd {field:auth_username} needs {field}", "the password Secret")
        )
    if spec.password and not spec.auth_username:
        refusals.append(
            Refusal(
                "auth_username",
                "etcd got a password but no {field}",
                "name the etcd user it belongs to",
            )
        )
    if spec.token:
        refusals.append(
            Refusal("token", "etcd takes no token", "authenticate with {field:auth_username} "
                    "and a password, or a client certificate", words=True)
        )  # fmt: skip
    for name in ("auth_role", "auth_mount", "auth_token_path"):
        if getattr(spec, name):
            refusals.append(
                Refusal(name, "etcd has no login method that takes {field}", "remove it (etcd "
                        "speaks username/password and client certificates)")
            )  # fmt: skip
    if endpoint is not None and not endpoint.tls and spec.tls.configured:
        refusals.append(
            Refusal("tls", f"TLS settings ({TLS_INPUTS}) on an http:// etcd endpoint would be "
                    "ignored", "use https:// or remove them", words=True)
        )  # fmt: skip
    return refusals
