"""The ``http`` store type, contributed through the ``dynconf_stores`` hook.

Everything a caller can refuse is refused here, in ``validate``: the agent calls it at start and
the webhook at admission, so a bad spec fails with the same sentence in both places and never
reaches a request. ``build`` imports the client module, so listing plugins stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from dynconf.errors import Refusal
from dynconf.plugins import hookimpl
from dynconf.stores import (
    AuthMethod,
    StoreInput,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    format_from_key,
    redact_url,
)

if TYPE_CHECKING:
    from dynconf_store_http.source import HttpSource

__all__ = ["AUTH_METHODS", "HTTP_STORE", "HttpStoreType", "dynconf_stores"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

AUTH_METHODS: Final[Mapping[str, AuthMethod]] = {
    "none": AuthMethod("none", (), "no credential"),
    "token": AuthMethod(
        "token", ("token",), "DYNAMIC_CONFIG_AGENT_TOKEN sent as `Authorization: Bearer`"
    ),
    "basic": AuthMethod(
        "basic",
        ("auth_username", "password"),
        "--auth-username and DYNAMIC_CONFIG_AGENT_PASSWORD sent as HTTP basic auth",
    ),
}


TOKEN_HEADER: Final = "token_header"  # noqa: S105 - an input name, not a credential
"""The store's own input: the request header the token goes in. No :class:`StoreSpec` field
holds it, so it is a setting input (``StoreSpec.extra``), and the agent (``--token-header``),
the webhook (``dynamic-config.rs/token-header``) and the node agent (the volume attribute
``token-header``) all take it from this declaration alone."""

_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
"""An HTTP field name (RFC 9110 token), at most 64 characters."""


def document_url(endpoint: str, key: str) -> str:
    """The URL fetched: the endpoint (a base URL) joined with the key (a path under it)."""
    return f"{endpoint.rstrip('/')}/{key.lstrip('/')}"


def auth_method(spec: StoreSpec) -> str:
    """``--auth`` when given; otherwise the secret that is set picks it (token, then password).

    Inferring keeps the common case to one environment variable, and an explicit ``--auth
    none`` beside a secret is still refused, so nothing is sent that the spec did not ask for.
    """
    if spec.auth is not None:
        return spec.auth
    if spec.token:
        return "token"
    if spec.password:
        return "basic"
    return "none"


class HttpStoreType(StoreTypeBase):
    """A document served over HTTP(S); the ETag (or Last-Modified) is the change marker."""

    name = "http"
    capability = WatchCapability.CONDITIONAL
    auth_methods = AUTH_METHODS
    default_auth = "none"
    inputs = (
        StoreInput(TOKEN_HEADER, summary="the request header that carries the token, sent bare "
                   "(default: Authorization, as Bearer)"),
    )  # fmt: skip

    def credential_hint(self) -> str:
        return "DYNAMIC_CONFIG_AGENT_TOKEN or DYNAMIC_CONFIG_AGENT_PASSWORD"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        """The store's own rules, as data: each names the input it is about, so the agent, the
        webhook and a library caller each say it in their own words (``--auth-username``,
        ``dynamic-config.rs/auth-username``, ``auth_username=``)."""
        refusals: list[Refusal] = []
        shown = redact_url(spec.endpoint)
        parts = urlsplit(spec.endpoint)
        if parts.scheme not in ("http", "https"):
            refusals.append(
                Refusal("endpoint", f"the http {{field}} {shown} needs an http:// or https:// "
                        "scheme", "e.g. https://config.example.com/documents")
            )  # fmt: skip
        elif not parts.hostname:
            refusals.append(Refusal("endpoint", f"the http {{field}} {shown} names no host"))
        if "@" in parts.netloc:
            refusals.append(
                Refusal("endpoint", f"the http {{field}} {shown} carries credentials",
                        "remove them and use {field:auth=basic} with {field:password}")
            )  # fmt: skip
        if parts.query or parts.fragment:
            refusals.append(
                Refusal("endpoint", f"the http {{field}} {shown} has a query or fragment",
                        "remove it")
            )  # fmt: skip
        if parts.scheme == "http" and spec.tls.configured:
            refusals.append(
                Refusal("endpoint", "TLS settings ({field:tls.ca_file}, "
                        "{field:tls.cert_file+tls.key_file}, {field:tls.skip_verify}) need an "
                        "https:// {field}", "change the scheme or remove them")
            )  # fmt: skip
        if spec.tls.server_name:
            refusals.append(
                Refusal("tls.server_name", "http does not support {field}",
                        "put the certificate's name in the endpoint's host")
            )  # fmt: skip
        if not spec.key.strip("/"):
            refusals.append(Refusal("key", "the http {field} is the document's path under the "
                                    "endpoint", "name one"))  # fmt: skip
        elif format_from_key(spec.key) is None:
            refusals.append(
                Refusal("key", f"the http {{field}} {spec.key} has no format extension",
                        "end it in .json, .toml, .yaml, .ini, .properties or .env")
            )  # fmt: skip
        method = auth_method(spec)
        if spec.auth is None and method == "basic" and not spec.auth_username:
            refusals.append(Refusal("auth_username", "http auth basic needs {field}"))
        if method != "token" and spec.token:
            refusals.append(
                Refusal("token", f"{{field:auth={method}}} sends no token, but {{field}} is set",
                        "use {field:auth=token}")
            )  # fmt: skip
        if method != "basic" and spec.password:
            refusals.append(
                Refusal("password", f"{{field:auth={method}}} sends no password, but {{field}} "
                        "is set", "use {field:auth=basic}")
            )  # fmt: skip
        for name in ("auth_mount", "auth_role", "auth_token_path"):
            if getattr(spec, name):
                refusals.append(Refusal(name, "http takes no {field}", "remove it"))
        if spec.auth_username and method != "basic":
            refusals.append(
                Refusal("auth_username", "{field} belongs to {field:auth=basic}",
                        "add it or remove the name")
            )  # fmt: skip
        header = spec.extra.get(TOKEN_HEADER)
        if header is not None and method != "token":
            refusals.append(Refusal(TOKEN_HEADER, f"{{field}} names where the token goes, but "
                                    f"{{field:auth={method}}} sends none", "use {field:auth=token} "
                                    "or remove it"))  # fmt: skip
        elif header is not None and not _HEADER_NAME.fullmatch(header):
            refusals.append(Refusal(TOKEN_HEADER, "{field} is not an HTTP header name",
                                    "use letters, digits and -, e.g. X-Config-Token"))  # fmt: skip
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(Refusal("timeout", "{field} must be a positive number of seconds "
                                    "for http"))  # fmt: skip
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        return f"http {redact_url(document_url(spec.endpoint, spec.key))}"

    def build(self, spec: StoreSpec) -> HttpSource:
        """A source for ``spec``; refuses (BackendError) what :meth:`validate` refuses."""
        from dynconf.errors import BackendError, Origin
        from dynconf_store_http.source import DEFAULT_TIMEOUT, HttpSource

        description = self.describe(spec)
        refusals = self.validate(spec)
        if refusals:
            raise BackendError("; ".join(refusals), origin=Origin.remote(description))
        fmt = format_from_key(spec.key)
        assert fmt is not None  # validate refused a key without one
        method = auth_method(spec)
        return HttpSource(
            document_url(spec.endpoint, spec.key),
            fmt,
            spec.tls,
            description=description,
            token=spec.token if method == "token" else None,
            token_header=spec.extra.get(TOKEN_HEADER),
            basic=(spec.auth_username or "", spec.password or "") if method == "basic" else None,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
        )


HTTP_STORE: Final = HttpStoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [HTTP_STORE]
