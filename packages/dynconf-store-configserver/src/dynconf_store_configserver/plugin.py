"""The ``config-server`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. ``requests`` is imported by ``build`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from dynconf.plugins import hookimpl
from dynconf.store_http import HTTP_SETTINGS, HttpPolicy
from dynconf.stores import (
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


def _endpoint_refusal(endpoint: str) -> str | None:
    shown = redact_url(endpoint, lone_is_username=True)
    if not endpoint:
        return (
            "config-server needs --endpoint (or DYNAMIC_CONFIG_AGENT_ENDPOINT): the server's "
            "URL, e.g. http://config-server.infra.svc:8888"
        )
    scheme, sep, rest = endpoint.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return f"the config-server endpoint {shown} needs an http:// or https:// scheme"
    if "@" in rest.split("/", 1)[0]:
        return (
            f"the config-server endpoint {shown} carries credentials; remove them and pass "
            "the client token as the token (DYNAMIC_CONFIG_AGENT_TOKEN)"
        )
    try:
        parts = urlsplit(endpoint)
        _ = parts.port
    except ValueError:
        return f"the config-server endpoint {shown} does not parse as a URL"
    if not parts.hostname:
        return f"the config-server endpoint {shown} names no host"
    if parts.query or parts.fragment:
        return f"the config-server endpoint {shown} has a query or fragment; remove it"
    return None


class ConfigServerStoreType(StoreTypeBase):
    """The config server: one ``<application>/<profile>`` document, pushed over SSE."""

    constructor = "dynconf_store_configserver.remote:ConfigServer"
    """The typed Python constructor (``from dynconf.remote import ConfigServer``)."""

    name = "config-server"
    capability = WatchCapability.PUSH
    auth_methods = AUTH_METHODS
    default_auth = "none"

    def credential_hint(self) -> str:
        return "a client token or the pod's service-account token"

    def store_refusals(self, spec: StoreSpec) -> list[str]:
        refusals: list[str] = []
        problem = _endpoint_refusal(spec.endpoint)
        if problem:
            refusals.append(problem)
        elif spec.endpoint.lower().startswith("http://") and spec.tls.configured:
            refusals.append(
                "TLS settings (--ca, --tls-cert/--tls-key, --tls-server-name, "
                "--tls-skip-verify) need an https:// config-server endpoint; change the "
                "scheme or remove them"
            )
        application, slash, profile = spec.key.strip("/").partition("/")
        if not slash or not is_name(application) or not is_name(profile):
            refusals.append(
                f"the config-server key {spec.key} is not <application>/<profile>; write two "
                "names of letters, digits, `.`, `_`, `-`, e.g. billing/prod"
            )
        method = spec.auth or "none"
        if spec.auth == "none" and spec.token:
            refusals.append(
                "--auth none sends no token, but a token is set; use --auth token, or remove it"
            )
        if method == "kubernetes" and spec.token:
            refusals.append(
                "--auth kubernetes presents the service-account token file, but a token is "
                "set; remove it, or use --auth token"
            )
        if spec.auth_token_path and method != "kubernetes":
            refusals.append(
                "--auth-token-path is where --auth kubernetes reads the service-account "
                "token; add --auth kubernetes or remove it"
            )
        for flag, present in (
            ("--auth-mount", spec.auth_mount),
            ("--auth-role", spec.auth_role),
            ("--auth-username", spec.auth_username),
        ):
            if present:
                refusals.append(f"config-server takes no {flag}; remove it")
        if spec.password:
            refusals.append("config-server takes no password; remove DYNAMIC_CONFIG_AGENT_PASSWORD")
        refusals.extend(
            f"{name} is not a config-server setting; use one of: {', '.join(HTTP_SETTINGS)}"
            for name in sorted(spec.extra)
            if name not in HTTP_SETTINGS
        )
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append("--timeout must be a positive number of seconds for config-server")
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
