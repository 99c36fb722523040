"""The ``firestore`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. The Google client library is imported by ``build`` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from dynconf.errors import Refusal
from dynconf.plugins import hookimpl
from dynconf.store_http import USE_PROXY, HttpPolicy
from dynconf.stores import (
    AuthMethod,
    StoreInput,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
)

if TYPE_CHECKING:
    from dynconf_store_firestore.source import FirestoreSource

__all__ = ["FIRESTORE_STORE", "FirestoreStoreType", "Target", "dynconf_stores", "parse_target"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

AUTH_METHODS: Final[Mapping[str, AuthMethod]] = {
    "metadata-server": AuthMethod(
        "metadata-server",
        (),
        "the workload's own identity: short-lived tokens from the GCE/GKE metadata server",
    ),
    "access-token": AuthMethod(
        "access-token", ("token",), "an OAuth2 access token someone already obtained"
    ),
    "emulator": AuthMethod(
        "emulator", ("api_url",), "the Firestore emulator at --api-url: no credential at all"
    ),
}
DEFAULT_DATABASE: Final = "(default)"
_PROJECT: Final = re.compile(r"^[a-z0-9][a-z0-9.:-]{0,62}$")
_DATABASE: Final = re.compile(r"^(?:\(default\)|[a-z][a-z0-9-]{0,62})$")
_HOST_PORT: Final = re.compile(r"^(?:\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$")


@dataclass(frozen=True, slots=True)
class Target:
    """Where the document lives: project, database and the document path (even segments)."""

    project: str
    database: str
    path: str

    @property
    def name(self) -> str:
        return f"projects/{self.project}/databases/{self.database}/documents/{self.path}"


def parse_target(endpoint: str, key: str) -> Target | list[Refusal]:
    """The target, or the refusals for the endpoint and key (each naming the fix)."""
    refusals: list[Refusal] = []
    project, _, database = endpoint.strip().partition("/")
    database = database or DEFAULT_DATABASE
    if "://" in endpoint:
        refusals.append(
            Refusal("endpoint", f"the firestore endpoint {endpoint} is a URL", "the endpoint is "
                    "<project> or <project>/<database>, and an API address goes in "
                    "{field:api_url}", words=True)
        )  # fmt: skip
    elif not project:
        refusals.append(
            Refusal("endpoint", "firestore needs {field}", "the Google Cloud project, e.g. "
                    "acme-prod, or acme-prod/eu-config for a named database")
        )  # fmt: skip
    elif not _PROJECT.match(project) or not _DATABASE.match(database):
        refusals.append(
            Refusal("endpoint", f"the firestore endpoint {endpoint} is not <project> or "
                    "<project>/<database>", "write a project id (lowercase letters, digits, "
                    "`-`) and optionally one database id", words=True)
        )  # fmt: skip
    path = key.strip("/")
    segments = path.split("/") if path else []
    if not segments:
        refusals.append(
            Refusal("key", "firestore needs {field}", "a document path such as config/billing "
                    "(collection/document, nested as deep as needed)")
        )  # fmt: skip
    elif any(not s or s in (".", "..") or s.startswith("__") for s in segments):
        refusals.append(
            Refusal("key", f"the firestore key {key} has an empty, `.`/`..` or reserved `__` "
                    "segment", "write collection/document segments separated by single "
                    "slashes", words=True)
        )  # fmt: skip
    elif len(segments) % 2:
        refusals.append(
            Refusal("key", f"the firestore key {key} names a collection (an odd number of "
                    f"segments)", f"add the document id, e.g. {key}/<document>", words=True)
        )  # fmt: skip
    if refusals:
        return refusals
    return Target(project, database, path)


def emulator_address(api_url: str) -> str | None:
    """``host:port`` of an emulator given as ``host:port`` or ``http://host:port``."""
    text = api_url.strip().rstrip("/")
    if text.startswith("http://"):
        text = text[len("http://") :]
    return text if _HOST_PORT.match(text) else None


def api_endpoint(api_url: str) -> str | None:
    """``host[:port]`` of a TLS API endpoint given as ``https://host[:port]`` or ``host:port``."""
    text = api_url.strip().rstrip("/")
    if text.startswith("https://"):
        text = text[len("https://") :]
        if ":" not in text.rsplit("]", 1)[-1]:
            text += ":443"
    return text if _HOST_PORT.match(text) else None


class FirestoreStoreType(StoreTypeBase):
    """Firestore: one document's fields as a plain document; a snapshot listener as push."""

    constructor = "dynconf_store_firestore.remote:Firestore"
    """The typed Python constructor (``from dynconf.remote import Firestore``)."""

    name = "firestore"
    settings = (USE_PROXY,)
    inputs = (StoreInput("api_url", "url", summary="another Firestore API address"),)
    capability = WatchCapability.PUSH
    auth_methods = AUTH_METHODS
    default_auth = "metadata-server"

    def credential_hint(self) -> str:
        return "the metadata server, an access token, or none for the emulator"

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        target = parse_target(spec.endpoint, spec.key)
        refusals: list[Refusal] = target if isinstance(target, list) else []
        method = spec.auth or self.default_auth
        api_url = spec.setting("api_url")
        if api_url:
            if method == "emulator" and emulator_address(api_url) is None:
                refusals.append(
                    Refusal("api_url", f"{{field}} {api_url} is not the emulator's "
                            "host:port", "write 127.0.0.1:8080 or "
                            "http://firestore-emulator.test.svc:8080")
                )  # fmt: skip
            elif method != "emulator" and api_endpoint(api_url) is None:
                refusals.append(
                    Refusal("api_url", f"{{field}} {api_url} is not a TLS API address",
                            "write https://host[:port] (plain http is only for "
                            "{field:auth=emulator})")
                )  # fmt: skip
        if spec.token and method != "access-token":
            refusals.append(
                Refusal("token", f"firestore auth {method} sends no token, but a token is set",
                        "use {field:auth=access-token}, or remove the token", words=True)
            )  # fmt: skip
        for name in ("auth_mount", "auth_role", "auth_username", "auth_token_path"):
            if getattr(spec, name):
                refusals.append(Refusal(name, "firestore takes no {field}", "remove it"))
        if spec.password:
            refusals.append(Refusal("password", "firestore takes no password",
                                    "remove {field}", words=True))  # fmt: skip
        if spec.tls.configured:
            refusals.append(
                Refusal("tls", "the Firestore client cannot honour {field:tls.ca_file}, "
                        "{field:tls.cert_file+tls.key_file}, {field:tls.server_name} or "
                        "{field:tls.skip_verify} (it trusts the platform roots over gRPC, and "
                        "the emulator speaks plain HTTP/2)", "remove them", words=True)
            )  # fmt: skip
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(
                Refusal("timeout", "{field} must be a positive number of seconds for firestore")
            )
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        project, _, database = spec.endpoint.strip().partition("/")
        where = f" at {spec.setting('api_url')}" if spec.setting("api_url") else ""
        return (
            f"firestore projects/{project}/databases/{database or DEFAULT_DATABASE}"
            f"/documents/{spec.key.strip('/')}{where}"
        )

    def build(self, spec: StoreSpec) -> FirestoreSource:
        """A source for ``spec``; refuses (BackendError) a spec :meth:`validate` refuses."""
        from dynconf_store_firestore.source import DEFAULT_TIMEOUT, Connection, FirestoreSource

        description = self.admit(spec)
        target = parse_target(spec.endpoint, spec.key)
        assert isinstance(target, Target)
        method = spec.auth or self.default_auth or "metadata-server"
        api_url = spec.setting("api_url")
        emulator = emulator_address(api_url) if method == "emulator" and api_url else None
        endpoint = api_endpoint(api_url) if method != "emulator" and api_url else None
        connection = Connection(
            target=target,
            method=method,
            emulator=emulator,
            api_endpoint=endpoint,
            token=spec.token if method == "access-token" else None,
            use_proxy=HttpPolicy.from_settings(spec.extra).use_proxy,
        )
        return FirestoreSource(
            connection,
            description=description,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            max_bytes=spec.max_bytes,
        )


FIRESTORE_STORE: Final = FirestoreStoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [FIRESTORE_STORE]
