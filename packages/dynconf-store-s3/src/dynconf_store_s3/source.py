"""The S3 source: one object read as one document, watched by conditional HEAD on its ETag.

Blocking, not async: boto3/botocore is a blocking client, so the source implements
:class:`~dynconf.stores.RemoteSource` and the engine runs it in a worker thread (the
contract: pick the trait the client speaks, never wrap one in the other). The client is
botocore's own S3 client — boto3 adds only resource objects this store does not use, and
costs memory at import.

``fetch`` is ``GetObject``: the body decoded as UTF-8, the format named by the key's
extension (or the spec), and the ETag (quotes stripped) as the revision. A missing object
(404, ``NoSuchKey``) is :data:`ABSENT`; a missing bucket is a remote error that says so.

``changes`` asks each interval with ``HeadObject`` and ``If-None-Match: <last ETag>``: a
304 means unchanged and costs no body; a new ETag is followed by one ``GetObject``, whose
ETag becomes the marker (the object may have moved again between the two requests). The
first answer primes the marker and yields nothing. A 404 yields :data:`ABSENT` once; the
object's return yields its document. Failures back off with :class:`~dynconf.stores.Pace`;
a refused credential is raised.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dynconf.errors import AuthError, DynconfError
from dynconf.render import DEFAULT_MAX_DOCUMENT_BYTES, check_byte_count
from dynconf.sources import SourceSupport
from dynconf.store_http import THROTTLE_STATUSES, note_ignored_proxy, retry_after
from dynconf.stores import (
    ABSENT,
    Absent,
    Fetched,
    Pace,
    TlsSettings,
    report_watching,
)
from dynconf_store_s3.plugin import PLACEHOLDER_REGION, S3StoreType

__all__ = ["AUTH_CODES", "DEFAULT_TIMEOUT", "FailureSink", "S3Settings", "S3Source"]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds for connecting and for each read of one attempt (botocore retries 3 times)."""
MAX_ATTEMPTS: Final = 3

THROTTLE_CODES: Final = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}
)
"""The error codes S3 and S3-compatible servers send to say "fewer requests" (with 503)."""
AUTH_CODES: Final = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
    }
)
"""S3 error codes that mean the store refused the credential. Everything else is remote,
including ``RequestTimeTooSkewed`` (also a 403: a clock to fix, not a credential)."""
_NOT_FOUND: Final = frozenset({"404", "NoSuchKey", "NotFound"})
_NOT_MODIFIED: Final = "304"

FailureSink = Callable[[DynconfError], None]
"""Receives each failure the watch survives by retrying (the agent counts and logs them)."""

log = logging.getLogger("dynconf.store.s3")


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Everything needed to build the client and address the object."""

    bucket: str
    key: str
    format_name: str
    description: str
    api_url: str | None = None
    tls: TlsSettings = field(default_factory=TlsSettings)
    timeout: float = DEFAULT_TIMEOUT
    use_proxy: bool = False
    """Route through the environment's proxy (``use_proxy=true``); off, botocore's own
    reading of ``HTTPS_PROXY`` / ``HTTP_PROXY`` is replaced by an empty proxy map."""
    max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    """The document ceiling: an object past it (by its length, or by what it sends) is
    refused before it is held whole (:attr:`dynconf.stores.StoreSpec.max_bytes`)."""


@dataclass(frozen=True, slots=True)
class _Head:
    etag: str | None
    """None when the object is absent."""


class S3Source(SourceSupport):
    """A blocking :class:`~dynconf.stores.RemoteSource` over one S3 object."""

    reports_watching = True

    capability = S3StoreType.capability  # the plugin's declaration, one home
    failure_log = log
    failure_detail = "s3 watch check failed; retrying"

    def __init__(self, settings: S3Settings, *, on_failure: FailureSink | None = None) -> None:
        self._settings = settings
        self.description = settings.description
        self._client: Any = None
        self.on_failure = on_failure
        self.connected = False
        """True while the watch's last check succeeded."""

    @property
    def client(self) -> Any:
        """The botocore S3 client, built (and the CA file read) at first use."""
        if self._client is None:
            self._client = self._build_client()
        return self._client

    def fetch(self) -> Fetched | Absent:
        """Read the object now: its document, or ABSENT when there is no such object."""
        return self._get()

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield the document (or ABSENT) each time a conditional HEAD sees it move.

        Stopping is checked every 250 ms while waiting, so it takes at most that plus one
        request.
        """
        pace = Pace(interval)
        primed = False
        marker: str | None = None  # the ETag last seen; None while the object is absent
        while not stop():
            try:
                head = self._head(marker if primed else None)
                if head is not None and not primed:
                    primed, marker = True, head.etag
                elif head is not None:
                    answer = ABSENT if head.etag is None else self._get()
                    if isinstance(answer, Fetched):
                        marker = answer.revision or head.etag
                        yield answer
                    elif marker is not None:  # deleted (perhaps between HEAD and GET)
                        marker = None
                        yield ABSENT
                self.connected = True
                pace.succeeded()
                report_watching(self)
            except AuthError:
                self.connected = False
                raise
            except DynconfError as exc:
                self.connected = False
                self.report(exc)
                pace.failed()
            if self.pause(pace.next_wait(), stop):
                return

    def close(self) -> None:
        """Release the client's connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # ------------------------------------------------------------------ internals
    def _build_client(self) -> Any:
        import botocore.config
        import botocore.session

        settings = self._settings
        tls = settings.tls
        verify: bool | str = True
        if tls.ca_file:
            if not Path(tls.ca_file).is_file():
                raise self.remote_error(
                    f"--ca {tls.ca_file} is not a readable file; mount it or fix the path"
                )
            verify = tls.ca_file
        elif tls.skip_verify:
            log.warning(
                "store_tls_skip_verify",
                extra={"store": self.description},
            )
            verify = False
        session = botocore.session.get_session()
        if not settings.use_proxy:
            note_ignored_proxy(self.description)
            _direct_instance_metadata(session)
        # The AWS SDKs read AWS_REGION; botocore reads only AWS_DEFAULT_REGION and profiles.
        region = os.environ.get("AWS_REGION") or session.get_config_variable("region")
        if not region and settings.api_url:
            region = PLACEHOLDER_REGION
        config = botocore.config.Config(
            s3={"addressing_style": "path"},
            connect_timeout=settings.timeout,
            read_timeout=settings.timeout,
            retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
            user_agent_extra="dynconf",
            # Every request is signed with the credential: it goes to the endpoint directly
            # unless the spec opts in (None lets botocore read the environment's proxies).
            proxies=None if settings.use_proxy else {},
        )
        client = session.create_client(
            "s3",
            region_name=region or None,
            endpoint_url=settings.api_url,
            verify=verify,
            config=config,
        )
        if settings.api_url:
            # An S3-compatible server has no regions to chase. botocore's region redirector
            # would answer its 3xx with a HeadBucket that, redirected again, recurses until
            # RecursionError; marking every call as already redirected keeps it out, so a
            # redirect surfaces as the answer it is.
            client.meta.events.register("before-call.s3", _no_region_redirect)
        return client

    def _head(self, etag: str | None) -> _Head | None:
        """A conditional HEAD: None when the ETag still matches (304), else the new state."""
        params: dict[str, str] = {"Bucket": self._settings.bucket, "Key": self._settings.key}
        if etag is not None:
            params["IfNoneMatch"] = f'"{etag}"'
        try:
            answer = self._call("head_object", params)
        except _Answered as exc:
            if exc.code == _NOT_MODIFIED:
                return None
            if exc.code in _NOT_FOUND or exc.status == 404:
                return _Head(None)
            if exc.status == 403:
                # A HEAD answer has no body, so its code is only "403". The GET names the
                # code (AccessDenied vs RequestTimeTooSkewed) and is refused just the same,
                # so it downloads nothing.
                self._get()
            raise self._classified(exc) from None
        etag_header = answer.get("ETag")
        if not etag_header:
            raise self.remote_error("answered a HEAD without an ETag; is a proxy in front of it?")
        return _Head(str(etag_header).strip('"'))

    def _get(self) -> Fetched | Absent:
        params = {"Bucket": self._settings.bucket, "Key": self._settings.key}
        try:
            answer = self._call("get_object", params)
        except _Answered as exc:
            if exc.code in _NOT_FOUND:
                return ABSENT
            raise self._classified(exc) from None
        body = answer["Body"]
        ceiling = self._settings.max_bytes
        try:
            check_byte_count(int(answer.get("ContentLength") or 0), ceiling)
            data = body.read(ceiling + 1)  # a length the answer misstated is bounded too
            check_byte_count(len(data), ceiling)
        except DynconfError:
            raise
        except Exception:
            raise self.remote_error(
                "dropped the connection while sending the object; retrying"
            ) from None
        finally:
            body.close()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.remote_error(
                "holds an object that is not UTF-8 text; store the document as UTF-8"
            ) from None
        etag = answer.get("ETag")
        return Fetched(
            text=text,
            format=self._settings.format_name,
            revision=str(etag).strip('"') if etag else None,
        )

    def _call(self, operation: str, params: dict[str, str]) -> dict[str, Any]:
        """One client call; an S3 error answer is raised as :class:`_Answered` (typed)."""
        import botocore.exceptions as bex

        try:
            result: dict[str, Any] = getattr(self.client, operation)(**params)
        except bex.ClientError as exc:
            error = exc.response.get("Error", {})
            meta = exc.response.get("ResponseMetadata", {})
            headers = meta.get("HTTPHeaders") or {}
            raise _Answered(
                str(error.get("Code", "")),
                int(meta.get("HTTPStatusCode", 0)),
                retry_after(headers.get("retry-after")),
            ) from None
        except bex.NoCredentialsError:
            raise self.remote_error(
                "found no AWS credentials: give the pod an IAM role (IRSA) or set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the aws-secret annotation)"
            ) from None
        except bex.SSLError:
            raise self.remote_error(
                "refused the TLS handshake; check --ca (the CA that signed the server's "
                "certificate) and that the --api-url host is named in it"
            ) from None
        except (bex.ConnectTimeoutError, bex.ReadTimeoutError):
            raise self.remote_error(
                f"did not answer within the {self._settings.timeout:g} s timeout; check the "
                "server is up, or raise --timeout"
            ) from None
        except (bex.EndpointConnectionError, bex.ConnectionError):
            raise self.remote_error(
                "cannot be reached; check --api-url (or the region) and that the server runs"
            ) from None
        except bex.BotoCoreError as exc:
            raise self.remote_error(f"request failed ({type(exc).__name__})") from None
        return result

    def _classified(self, answered: _Answered) -> DynconfError:
        code, status = answered.code, answered.status
        if code in AUTH_CODES:
            return self.auth_error(
                f"refused the credential ({code}); grant the role "
                "s3:GetObject on the object, or replace the access keys"
            )
        if code == "NoSuchBucket":
            return self.remote_error(
                "has no such bucket (NoSuchBucket); check the endpoint (the bucket name) and "
                "the region or --api-url"
            )
        if code in THROTTLE_CODES or status in THROTTLE_STATUSES:
            return self.throttled_error(
                f"asked for fewer requests ({code or status}) after botocore's own retries; "
                "backing off (lower the store budget or the watch rate)",
                answered.retry_after,
            )
        if code == "RequestTimeTooSkewed":
            return self.remote_error(
                "refused the request: the clock is skewed; fix the node's time"
            )
        if 300 <= status < 400:
            return self.remote_error(
                f"answered {status} ({code or 'no code'}), a redirect; the s3 store never "
                "follows one to another address: point --api-url (or the region) at the "
                "address that serves the bucket"
            )
        return self.remote_error(f"answered {status} ({code or 'no code'}); retrying")

    def __repr__(self) -> str:
        return f"S3Source({self.description!r})"


def _direct_instance_metadata(session: Any) -> None:
    """Make the credential chain's IMDS fetcher ignore the proxy variables.

    botocore builds that fetcher with the environment's proxies, and IMDS answers in plain
    HTTP with the role's keys in the body, so a proxy named by the pod's environment would
    read them. The fetcher's HTTP session is replaced by one with an empty proxy map (the
    container-credentials fetcher already uses none; STS for IRSA is HTTPS).
    """
    import botocore.credentials
    import botocore.httpsession

    resolver = session.get_component("credential_provider")
    for provider in getattr(resolver, "providers", ()):
        if isinstance(provider, botocore.credentials.InstanceMetadataProvider):
            fetcher = provider._role_fetcher
            fetcher._session = botocore.httpsession.URLLib3Session(
                timeout=fetcher._timeout, proxies={}
            )


def _no_region_redirect(context: dict[str, Any], **_kwargs: Any) -> None:
    """Tell botocore's region redirector this call was redirected already (it then stays out)."""
    context.setdefault("s3_redirect", {})["redirected"] = True


class _Answered(Exception):
    """S3 answered with an error status; the code and status decide, never the text."""

    def __init__(self, code: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.status = status
        self.retry_after = retry_after
