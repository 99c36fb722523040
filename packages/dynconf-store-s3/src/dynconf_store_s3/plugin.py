"""The ``s3`` store type, contributed through the ``dynconf_stores`` hook.

Validation lives here so the agent (at start) and the webhook (at admission) refuse the same
specs with the same sentences. Building imports botocore; discovery does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

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


def bucket_refusal(bucket: str) -> str | None:
    """A refusal for an endpoint that is not an S3 bucket name, or None."""
    if not bucket:
        return (
            "s3 needs --endpoint (or DYNAMIC_CONFIG_AGENT_ENDPOINT): the bucket name, e.g. "
            "myapp-config"
        )
    if "://" in bucket or "/" in bucket:
        return (
            f"the s3 endpoint {redact_url(bucket)} is not a bucket name: the endpoint is the "
            "bucket (e.g. myapp-config); put a server URL in --api-url"
        )
    if not _BUCKET.match(bucket) or ".." in bucket or _IP_LIKE.match(bucket):
        return (
            f"the s3 endpoint {bucket} is not a valid bucket name (3-63 lowercase letters, "
            "digits, `.` and `-`, starting and ending with a letter or digit)"
        )
    return None


class S3StoreType(StoreTypeBase):
    """One S3 object is one document; watched by conditional HEAD on its ETag."""

    constructor = "dynconf_store_s3.remote:S3"
    """The typed Python constructor (``from dynconf.remote import S3``)."""

    name = "s3"
    inputs = (StoreInput("api_url", "url", summary="an S3-compatible server"),)
    capability = WatchCapability.CONDITIONAL
    auth_methods: Mapping[str, AuthMethod] = {}
    default_auth = None

    def credential_hint(self) -> str:
        return (
            "the ambient AWS credential chain (IRSA, instance or task role, a profile, or "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
        )

    def store_refusals(self, spec: StoreSpec) -> list[str]:
        refusals: list[str] = []
        bucket = bucket_refusal(spec.endpoint.strip())
        if bucket:
            refusals.append(bucket)
        refusals.extend(self._key_refusals(spec))
        refusals.extend(
            f"{name} is not an s3 setting; use one of: {', '.join(SETTINGS)}"
            for name in sorted(spec.extra)
            if name not in SETTINGS
        )
        refusals.extend(self._api_url_refusals(spec))
        refusals.extend(self._tls_refusals(spec))
        for flag, value in (("--auth-role", spec.auth_role), ("--auth-mount", spec.auth_mount),
                            ("--auth-username", spec.auth_username),
                            ("--auth-token-path", spec.auth_token_path)):  # fmt: skip
            if value:
                refusals.append(
                    f"s3 takes no {flag}; its credentials come from {self.credential_hint()}"
                )
        if spec.token or spec.password:
            refusals.append(
                "s3 takes no token or password; static keys ride AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (the aws-secret annotation)"
            )
        if spec.timeout is not None and spec.timeout <= 0:
            refusals.append("--timeout must be a positive number of seconds for s3")
        return refusals

    @staticmethod
    def _key_refusals(spec: StoreSpec) -> list[str]:
        key = spec.key.lstrip("/")
        if not key:
            return ["s3 needs --key: the object key, with an extension, e.g. prod/db.json"]
        if key.endswith("/"):
            return [
                f"the s3 key {spec.key} is a folder; name one object holding the document, "
                "e.g. prod/db.json"
            ]
        if spec.extra.get("format") is None and format_from_key(key) is not None:
            return []
        return format_refusals("s3", spec.key, spec.extra.get("format"), noun="object")

    @staticmethod
    def _api_url_refusals(spec: StoreSpec) -> list[str]:
        if not spec.api_url:
            return []
        shown = redact_url(spec.api_url)
        scheme, sep, rest = spec.api_url.partition("://")
        if not sep or scheme.lower() not in ("http", "https"):
            return [
                f"--api-url {shown} needs an http:// or https:// scheme, e.g. "
                "http://minio.infra.svc:9000"
            ]
        if "@" in rest.split("/", 1)[0]:
            return [
                f"--api-url {shown} carries credentials; remove them and give the keys as "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
            ]
        try:
            parts = urlsplit(spec.api_url)
            _ = parts.port
        except ValueError:
            return [f"--api-url {shown} does not parse as a URL; write scheme://host:port"]
        if not parts.hostname:
            return [f"--api-url {shown} names no host; write scheme://host:port"]
        if spec.tls.configured and scheme.lower() == "http":
            return [
                "TLS settings (--ca, --tls-skip-verify) need an https:// --api-url; change "
                "the scheme or remove them"
            ]
        return []

    @staticmethod
    def _tls_refusals(spec: StoreSpec) -> list[str]:
        refusals: list[str] = []
        if spec.tls.cert_file or spec.tls.key_file:
            refusals.append(
                "s3 cannot present a client certificate (--tls-cert/--tls-key): the S3 "
                "client has no setting for one; remove them (--ca for a private CA is "
                "supported)"
            )
        if spec.tls.server_name:
            refusals.append(
                "s3 cannot override the TLS server name (--tls-server-name): the S3 client "
                "verifies the --api-url host; use a URL whose host the certificate names"
            )
        return refusals

    def describe(self, spec: StoreSpec) -> str:
        key = spec.key.lstrip("/")
        bucket = spec.endpoint.strip()
        if spec.api_url:
            return f"s3 {redact_url(spec.api_url).rstrip('/')} {bucket}/{key}"
        return f"s3 {bucket}/{key}"

    def build(self, spec: StoreSpec) -> S3Source:
        """A source for ``spec`` (no I/O); refuses (BackendError) what :meth:`validate` refuses."""
        from dynconf_store_s3.source import DEFAULT_TIMEOUT, S3Settings, S3Source

        description = self.admit(spec)
        key = spec.key.lstrip("/")
        settings = S3Settings(
            bucket=spec.endpoint.strip(),
            key=key,
            format_name=(spec.extra.get("format") or format_from_key(key) or "").lower(),
            api_url=spec.api_url.rstrip("/") if spec.api_url else None,
            tls=spec.tls,
            timeout=spec.timeout or DEFAULT_TIMEOUT,
            description=description,
            use_proxy=HttpPolicy.from_settings(spec.extra).use_proxy,
        )
        return S3Source(settings)


S3_STORE: Final = S3StoreType()


@hookimpl
def dynconf_stores() -> Iterable[StoreType]:
    return [S3_STORE]
