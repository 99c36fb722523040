"""The ``config-server`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. ``requests`` is imported by ``build`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from dynconf.errors import Refusal
from dynconf.plugins import hookimpl
from dynconf.store_http import HTTP_SETTINGS, HttpPolicy
from dynconf.stores import (
    TLS_INPUTS,
    AuthMethod,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    redact_url,
)
from dynconf_store_configserver.names import is_name

if TYPE_CHECKING:
    from dynconf_store_configserver.source import ConfigServerSource

__all__ = ["CONFIG_SERVER_STORE", "ConfigServerStoreType", "dynconf_stores"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

SERVICE_ACCOUNT_TOKEN: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105
"""Where a pod's projected service-account token is mounted by default."""

AUTH_METHODS: Final[Mapping[str, AuthMethod]] = {
    "none": AuthMethod("none", (), "no credential (a server with allow_anonymous)"),
    "token": AuthMethod("token", ("token",), "a client token from [[server.clients]], as bearer"),
    "kubernetes": AuthMethod(
        "kubernetes",
        (),
        "the pod's projected service-account token as bearer, re-read at every request",
    ),
}


def _endpoint_refusal(endpoint: str) -> Refusal | None:
    shown = redact_url(endpoint, lone_is_username=True)
    if not endpoint:
        return Refusal("endpoint", "config-server needs {field} (or "
                       "DYNAMIC_CONFIG_AGENT_ENDPOINT)", "the server's URL, e.g. "
                       "http://config-server.infra.svc:8888")  # fmt: skip
    scheme, sep, rest = endpoint.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return Refusal("endpoint", f"the config-server endpoint {shown} needs an http:// or "
                       "https:// scheme", "e.g. http://config-server.infra.svc:8888",
                       words=True)  # fmt: skip
    if "@" in rest.split("/", 1)[0]:
        return Refusal("endpoint", f"the config-server endpoint {shown} carries credentials",
                       "remove them and pass the client token as {field:token}",
                       words=True)  # fmt: skip
    try:
        parts = urlsplit(endpoint)
        _ = parts.port
    except ValueError:
        return Refusal("endpoint", f"the config-server endpoint {shown} does not parse as a "
                       "URL", "write scheme://host:port", words=True)  # fmt: skip
    if not parts.hostname:
        return Refusal("endpoint", f"the config-server endpoint {shown} names no host",
                       "write scheme://host:port", words=True)  # fmt: skip
    if parts.query or parts.fragment:
        return Refusal("endpoint", f"the config-server endpoint {shown} has a query or "
                       "fragment", "remove it", words=True)  # fmt: skip
    return None


class ConfigServerStoreType(StoreTypeBase):
    """The config server: one ``<application>/<profile>`` document, pushed over SSE."""

    constructor = "dynconf_store_configserver.remote:ConfigServer"
    """The typed Python constructor (``from dynconf.remote import ConfigServer``)."""

    name = "config-server"
    settings = HTTP_SETTINGS
    capability = WatchCapability.PUSH
    auth_methods = AUTH_METHODS
    default_auth = "none"

    def credential_hint(self) -> str:
        return "a client token or the pod's service-account token"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        problem = _endpoint_refusal(spec.endpoint)
        if problem:
            refusals.append(problem)
        elif spec.endpoint.lower().startswith("http://") and spec.tls.configured:
            refusals.append(
                Refusal("tls", f"TLS settings ({TLS_INPUTS}) need an https:// config-server "
                        "endpoint", "change the scheme or remove them", words=True)
            )  # fmt: skip
        application, slash, profile = spec.key.strip("/").partition("/")
        if not slash or not is_name(application) or not is_name(profile):
            refusals.append(
                Refusal("key", f"the config-server key {spec.key} is not "
                        "<application>/<profile>", "write two names of letters, digits, `.`, "
                        "`_`, `-`, e.g. billing/prod", words=True)
            )  # fmt: skip
        method = spec.auth or "none"
        if spec.auth == "none" and spec.token:
            refusals.append(
                Refusal("token", "{field:auth=none} sends no token, but a token is set",
                        "use {field:auth=token}, or remove it", words=True)
            )  # fmt: skip
        if method == "kubernetes" and spec.token:
            refusals.append(
                Refusal("token", "{field:auth=kubernetes} presents the service-account token "
                        "file, but a token is set", "remove it, or use {field:auth=token}",
                        words=True)
            )  # fmt: skip
        if spec.auth_token_path and method != "kubernetes":
            refusals.append(
                Refusal("auth_token_path", "{field} is where {field:auth=kubernetes} reads the "
                        "service-account token", "add {field:auth=kubernetes} or remove it")
            )  # fmt: skip
        for name in ("auth_mount", "auth_role", "auth_username"):
            if getattr(spec, name):
                refusals.append(Refusal(name, "config-server takes no {field}", "remove it"))
        if spec.password:
            refusals.append(Refusal("password", "config-server takes no password",
                                    "remove {field}", words=True))  # fmt: skip
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(
                Refusal("timeout", "{field} must be a positive number of seconds for "
                        "config-server")
            )  # fmt: skip
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        url = redact_url(spec.endpoint, lone_is_username=True).rstrip("/")
        return f"config server {url} {spec.key.strip('/')}"

    def build(self, spec: StoreSpec) -> ConfigServerSource:
        """A source for ``spec``; refuses (BackendError) a spec :meth:`validate` refuses."""
        from dynconf_store_configserver.source import (
            DEFAULT_TIMEOUT,
            ConfigServerSource,
            FileBearer,
            StaticBearer,
        )

        description = self.admit(spec)
        application, _, profile = spec.key.strip("/").partition("/")
        bearer: StaticBearer | FileBearer
        if spec.auth == "kubernetes":
            bearer = FileBearer(spec.auth_token_path or SERVICE_ACCOUNT_TOKEN)
        else:
            bearer = StaticBearer(spec.token if spec.auth != "none" else None)
        return ConfigServerSource(
            spec.endpoint.rstrip("/"),
            application,
            profile,
            bearer,
            spec.tls,
            description=description,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            policy=HttpPolicy.from_settings(spec.extra),
        )


CONFIG_SERVER_STORE: Final = ConfigServerStoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [CONFIG_SERVER_STORE]
