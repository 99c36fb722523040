"""The ``s3`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. Building imports botocore; discovery does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from dynconf.errors import Refusal
from dynconf.limits import MAX_DOCUMENT_BYTES
from dynconf.plugins import hookimpl
from dynconf.store_http import USE_PROXY, HttpPolicy
from dynconf.stores import (
    AuthMethod,
    StoreInput,
    StoreSpec,
    StoreType,
    StoreTypeBase,
    WatchCapability,
    format_from_key,
    format_refusals,
    redact_url,
)

if TYPE_CHECKING:
    from dynconf_store_s3.source import S3Source

__all__ = ["PLACEHOLDER_REGION", "S3_STORE", "S3StoreType", "dynconf_stores"]

DYNCONF_PLUGIN_API: Final = ">=1.0,<2"
"""The plugin API range this module was written for: a literal, read before any hook runs."""

SETTINGS: Final = ("format", USE_PROXY)
"""The ``extra`` keys an s3 spec accepts (botocore never follows a ``Location``, so there is
no ``follow_redirects``)."""
PLACEHOLDER_REGION: Final = "us-east-1"
"""The region signed with for ``--api-url`` when none is configured; MinIO/Ceph/R2 ignore it."""

_BUCKET: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_LIKE: Final = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


def bucket_refusal(bucket: str) -> Refusal | None:
    """A refusal for an endpoint that is not an S3 bucket name, or None."""
    if not bucket:
        return Refusal("endpoint", "s3 needs {field} (or DYNAMIC_CONFIG_AGENT_ENDPOINT)",
                       "the bucket name, e.g. myapp-config")  # fmt: skip
    if "://" in bucket or "/" in bucket:
        return Refusal("endpoint", f"the s3 endpoint {redact_url(bucket)} is not a bucket name",
                       "the endpoint is the bucket (e.g. myapp-config); put a server URL in "
                       "{field:api_url}", words=True)  # fmt: skip
    if not _BUCKET.match(bucket) or ".." in bucket or _IP_LIKE.match(bucket):
        return Refusal("endpoint", f"the s3 endpoint {bucket} is not a valid bucket name (3-63 "
                       "lowercase letters, digits, `.` and `-`, starting and ending with a "
                       "letter or digit)", words=True)  # fmt: skip
    return None


class S3StoreType(StoreTypeBase):
    """One S3 object is one document; watched by conditional HEAD on its ETag."""

    constructor = "dynconf_store_s3.remote:S3"
    """The typed Python constructor (``from dynconf.remote import S3``)."""

    name = "s3"
    settings = SETTINGS
    inputs = (StoreInput("api_url", "url", summary="an S3-compatible server"),)
    capability = WatchCapability.CONDITIONAL
    auth_methods: Mapping[str, AuthMethod] = {}
    default_auth = None

    def credential_hint(self) -> str:
        return (
            "the ambient AWS credential chain (IRSA, instance or task role, a profile, or "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        )

    def store_refusals(self, spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        bucket = bucket_refusal(spec.endpoint.strip())
        if bucket:
            refusals.append(bucket)
        refusals.extend(self._key_refusals(spec))
        refusals.extend(self._api_url_refusals(spec))
        refusals.extend(self._tls_refusals(spec))
        for name in ("auth_role", "auth_mount", "auth_username", "auth_token_path"):
            if getattr(spec, name):
                refusals.append(
                    Refusal(name, "s3 takes no {field}",
                            f"its credentials come from {self.credential_hint()}")
                )  # fmt: skip
        for name in ("token", "password"):
            if getattr(spec, name):
                refusals.append(
                    Refusal(name, f"s3 takes no {name}", "static keys ride AWS_ACCESS_KEY_ID "
                            "and AWS_SECRET_ACCESS_KEY (the aws-secret annotation)", words=True)
                )  # fmt: skip
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append(
                Refusal("timeout", "{field} must be a positive number of seconds for s3")
            )
        return refusals

    @staticmethod
    def _key_refusals(spec: StoreSpec) -> list[Refusal]:
        key = spec.key.lstrip("/")
        if not key:
            return [Refusal("key", "s3 needs {field}",
                            "the object key, with an extension, e.g. prod/db.json")]  # fmt: skip
        if key.endswith("/"):
            return [
                Refusal("key", f"the s3 key {spec.key} is a folder", "name one object holding "
                        "the document, e.g. prod/db.json", words=True)
            ]  # fmt: skip
        if spec.extra.get("format") is None and format_from_key(key) is not None:
            return []
        return format_refusals("s3", spec.key, spec.extra.get("format"), noun="object")

    @staticmethod
    def _api_url_refusals(spec: StoreSpec) -> list[Refusal]:
        api_url = spec.setting("api_url")
        if not api_url:
            return []
        shown = redact_url(api_url)
        scheme, sep, rest = api_url.partition("://")
        if not sep or scheme.lower() not in ("http", "https"):
            return [
                Refusal("api_url", f"{{field}} {shown} needs an http:// or https:// scheme",
                        "e.g. http://minio.infra.svc:9000")
            ]  # fmt: skip
        if "@" in rest.split("/", 1)[0]:
            return [
                Refusal("api_url", f"{{field}} {shown} carries credentials", "remove them and "
                        "give the keys as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY")
            ]  # fmt: skip
        try:
            parts = urlsplit(spec.setting("api_url"))
            _ = parts.port
        except ValueError:
            return [Refusal("api_url", f"{{field}} {shown} does not parse as a URL",
                            "write scheme://host:port")]  # fmt: skip
        if not parts.hostname:
            return [Refusal("api_url", f"{{field}} {shown} names no host",
                            "write scheme://host:port")]  # fmt: skip
        if spec.tls.configured and scheme.lower() == "http":
            return [
                Refusal("tls", "TLS settings ({field:tls.ca_file}, {field:tls.skip_verify}) "
                        "need an https:// {field:api_url}", "change the scheme or remove them",
                        words=True)
            ]  # fmt: skip
        return []

    @staticmethod
    def _tls_refusals(spec: StoreSpec) -> list[Refusal]:
        refusals: list[Refusal] = []
        if spec.tls.cert_file or spec.tls.key_file:
            refusals.append(
                Refusal("tls.cert_file", "s3 cannot present a client certificate "
                        "({field:tls.cert_file+tls.key_file}): the S3 client has no setting for "
                        "one", "remove them ({field:tls.ca_file} for a private CA is supported)",
                        words=True)
            )  # fmt: skip
        if spec.tls.server_name:
            refusals.append(
                Refusal("tls.server_name", "s3 cannot override the TLS server name ({field}): "
                        "the S3 client verifies the {field:api_url} host", "use a URL whose "
                        "host the certificate names")
            )  # fmt: skip
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        key = spec.key.lstrip("/")
        bucket = spec.endpoint.strip()
        api_url = spec.setting("api_url")
        if api_url:
            return f"s3 {redact_url(api_url).rstrip('/')} {bucket}/{key}"
        return f"s3 {bucket}/{key}"

    def build(self, spec: StoreSpec) -> S3Source:
        """A source for ``spec`` (no I/O); refuses (BackendError) what :meth:`validate` refuses."""
        from dynconf_store_s3.source import DEFAULT_TIMEOUT, S3Settings, S3Source

        description = self.admit(spec)
        key = spec.key.lstrip("/")
        api_url = spec.setting("api_url")
        settings = S3Settings(
            bucket=spec.endpoint.strip(),
            key=key,
            format_name=(spec.extra.get("format") or format_from_key(key) or "").lower(),
            api_url=api_url.rstrip("/") if api_url else None,
            tls=spec.tls,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            description=description,
            use_proxy=HttpPolicy.from_settings(spec.extra).use_proxy,
            max_bytes=spec.max_bytes or MAX_DOCUMENT_BYTES,
        )
        return S3Source(settings)


S3_STORE: Final = S3StoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [S3_STORE]
