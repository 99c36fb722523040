"""Where a store's HTTP request may go while it carries a credential: the one policy.

Every requests-based store client (consul, vault, etcd, the config-server client) sends a
credential with its requests: a token header, a bearer, a password in a login body. Left to
itself, requests follows a 3xx answer to wherever ``Location`` points (re-sending custom
headers such as ``X-Consul-Token`` and, for 307/308, the body with the password) and routes
through ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` from the environment, so a store
answer or a pod's environment could hand the credential to another host. :func:`store_session`
builds the one kind of session those stores use:

* environment proxies, ``.netrc`` and ``REQUESTS_CA_BUNDLE`` never apply (``trust_env`` off);
* a redirect is refused with a :class:`~dynconf.errors.RemoteError` that names the status,
  the origin it pointed to and the setting that opts in, whatever ``allow_redirects`` the
  client library passes.

Two per-store settings (``StoreSpec.extra`` keys, read by :meth:`HttpPolicy.from_settings` and
checked by :func:`http_setting_refusals`) opt in, each for that one store:

* ``follow_redirects=true`` follows a redirect only within the endpoint's own origin
  (scheme, host and port); a redirect elsewhere is still refused.
* ``use_proxy=true`` routes through the proxy the environment names for the endpoint
  (``NO_PROXY`` honoured).

Stores whose client is not requests apply the same :class:`HttpPolicy` in their own terms
(S3 gives botocore an empty proxy map; botocore never follows a ``Location``). requests is
imported only by :func:`store_session`, so a plugin's ``validate`` can read the settings
without it.

An answer is also bounded in size. A store's document ceiling
(:attr:`dynconf.stores.StoreSpec.max_bytes`) bounds what a legitimate answer can carry, by how
the store's wire encodes a document; :class:`BodyBound` is that bound and the one bounded read:
an answer whose ``Content-Length`` is past it is refused unread, one of unknown length is read
in chunks and refused as soon as it passes it, and either way the connection is closed rather
than pooled half-read. ``store_session(..., bound=...)`` applies it to every non-streaming
answer; a client that is not requests (consul's urllib3) reads through :meth:`BodyBound.read`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urljoin, urlsplit

from dynconf.errors import Origin, Refusal, RemoteError

if TYPE_CHECKING:
    import requests

__all__ = [
    "BODY_CHUNK",
    "THROTTLE_STATUSES",
    "BodyBound",
    "FOLLOW_REDIRECTS",
    "HTTP_SETTINGS",
    "USE_PROXY",
    "HttpPolicy",
    "follow_or_refuse",
    "http_setting_refusals",
    "note_ignored_proxy",
    "origin_of",
    "redirect_refusal",
    "retry_after",
    "store_session",
]

FOLLOW_REDIRECTS: Final = "follow_redirects"
"""The setting that lets a store follow redirects within its endpoint's origin."""
USE_PROXY: Final = "use_proxy"
"""The setting that lets a store use the environment's proxy for its endpoint."""
HTTP_SETTINGS: Final = (FOLLOW_REDIRECTS, USE_PROXY)

PROXY_VARIABLES: Final = (
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "GRPC_PROXY",
    "http_proxy", "https_proxy", "all_proxy", "grpc_proxy",
)  # fmt: skip
"""The environment variables a client library may route through (requests, botocore, gRPC)."""

THROTTLE_STATUSES: Final = frozenset({429, 503})
"""Statuses that mean "too many requests" / "come back later": a store raises
:class:`~dynconf.errors.ThrottledError` for them, which the call budget honours."""

BODY_CHUNK: Final = 64 * 1024
"""Bytes a bounded read takes from the socket at a time: at most this much past the bound
is ever held."""

log = logging.getLogger("dynconf.store")
_noted: set[str] = set()
"""Stores already told about ignored proxy variables (one line per store per process)."""

_TRUE: Final = frozenset({"true", "yes", "1", "on"})
_FALSE: Final = frozenset({"false", "no", "0", "off"})
_SHOWN: Final = 120
"""Longest origin quoted in a refusal (a hostile Location must not flood the log)."""


@dataclass(frozen=True, slots=True)
class HttpPolicy:
    """What one store's HTTP client may do beyond talking to its endpoint directly."""

    follow_redirects: bool = False
    use_proxy: bool = False

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> HttpPolicy:
        """The policy a spec's ``extra`` asks for (anything but a true spelling is off)."""
        return cls(
            follow_redirects=settings.get(FOLLOW_REDIRECTS, "").strip().lower() in _TRUE,
            use_proxy=settings.get(USE_PROXY, "").strip().lower() in _TRUE,
        )


@dataclass(frozen=True, slots=True)
class BodyBound:
    """The most bytes one answer may carry while its document stays within ``ceiling``.

    ``limit`` is the body's bound; ``ceiling`` is the document ceiling the refusal names. A
    refusal is the engine's own (:func:`dynconf.render.check_byte_count`, an
    :class:`~dynconf.errors.OversizeError`) and names only sizes: the answer's length, or how
    far a read of unknown length got before it stopped.
    """

    ceiling: int
    limit: int

    def __post_init__(self) -> None:
        if self.limit < self.ceiling:
            raise ValueError("an answer's bound is never below the document it carries")

    @classmethod
    def for_documents(
        cls, ceiling: int, *, expansion: Fraction, envelope: int, documents: int = 1
    ) -> BodyBound:
        """The bound for ``documents`` values of at most ``ceiling`` bytes each, each sent as
        at most ``expansion`` bytes per document byte, plus ``envelope`` bytes around each
        (the JSON keys, metadata and headers-in-body a store's answer wraps a value in)."""
        if expansion < 1:
            raise ValueError("a wire encoding never spells a document in fewer bytes")
        per_document = math.ceil(ceiling * expansion) + envelope
        return cls(ceiling, max(1, documents) * per_document)

    def check_length(self, length: str | None) -> None:
        """Refuse, before a byte of the body is read, an answer whose ``Content-Length`` is
        past the bound (a missing or unparsable length is left to :meth:`read`)."""
        if length is not None and length.strip().isdigit() and int(length) > self.limit:
            self.refuse(int(length))

    def read(self, chunks: Iterable[bytes]) -> bytes:
        """The body ``chunks`` carry, stopped (and refused) as soon as it passes the bound;
        the caller closes the connection when this raises."""
        parts: list[bytes] = []
        held = 0
        for chunk in chunks:
            held += len(chunk)
            if held > self.limit:
                self.refuse(held)
            parts.append(chunk)
        return b"".join(parts)

    def refuse(self, size: int) -> None:
        """Raise the engine's refusal for an answer of (at least) ``size`` bytes, ``size``
        being past :attr:`limit` and so past :attr:`ceiling`."""
        from dynconf.render import check_byte_count

        check_byte_count(size, self.ceiling)


def http_setting_refusals(store: str, settings: Mapping[str, str]) -> list[Refusal]:
    """Refusals for a ``follow_redirects`` / ``use_proxy`` value that is not a yes or a no."""
    refusals: list[Refusal] = []
    for name in HTTP_SETTINGS:
        value = settings.get(name)
        if value is not None and value.strip().lower() not in _TRUE | _FALSE:
            refusals.append(
                Refusal(f"extra.{name}", f"{{field}} for {store} must be true or false",
                        "leave it out to keep the default (off)")
            )  # fmt: skip
    return refusals


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delay-seconds or an HTTP date), else None."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    import time

    return max(0.0, when.timestamp() - time.time())


def origin_of(url: str) -> str:
    """``scheme://host:port`` of a URL (the default port filled in), for comparing and showing."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "an unparsable address"
    scheme = parts.scheme.lower()
    port = port or {"http": 80, "https": 443}.get(scheme)
    host = (parts.hostname or "").lower()
    shown = f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
    return shown[:_SHOWN]


def redirect_refusal(status: int, target: str, *, own: str, followable: bool) -> str:
    """The sentence (after the store's subject) that refuses one redirect.

    ``followable`` says the store has a ``follow_redirects`` setting at all.
    """
    where = origin_of(target)
    if followable and origin_of(own) == where:
        fix = f"set {FOLLOW_REDIRECTS}=true for this store to follow redirects within {where}"
    elif followable:
        fix = (
            f"a credential never follows a redirect to another origin (even with "
            f"{FOLLOW_REDIRECTS}=true, only redirects within {origin_of(own)} are followed); "
            f"point the endpoint at the address that answers"
        )
    else:
        fix = "point the endpoint at the address that answers"
    return f"answered {status} redirecting to {where}; the request was not sent there: {fix}"


def note_ignored_proxy(store: str, environ: Mapping[str, str] | None = None) -> None:
    """Log, once per store and process, that proxy variables are set but not used.

    A pod on a network that only a proxy leaves would otherwise see a bare "cannot be
    reached"; the line names the variables (never their values, which may hold a
    password) and the setting that opts in.
    """
    env = os.environ if environ is None else environ
    present = sorted({name.upper() for name in PROXY_VARIABLES if env.get(name)})
    if present and store not in _noted:
        _noted.add(store)
        log.warning(
            "store_proxy_ignored",
            extra={
                "store": store,
                "variables": ",".join(present),
                "reason": f"the store connects directly; set {USE_PROXY}=true to use the proxy",
            },
        )


def follow_or_refuse(
    policy: HttpPolicy, status: int, location: str, *, here: str, subject: str, origin: Origin
) -> str:
    """The absolute address a redirect from ``here`` may be followed to, or the refusal.

    The one rule for every HTTP client a store uses: followed only with ``follow_redirects``
    and only within ``here``'s origin; otherwise :class:`~dynconf.errors.RemoteError`, whose
    message starts with ``subject``.
    """
    target = urljoin(here, location)
    if policy.follow_redirects and origin_of(target) == origin_of(here):
        return target
    raise RemoteError(
        f"{subject} " + redirect_refusal(status, target, own=here, followable=True),
        origin=origin,
    )


def store_session(
    policy: HttpPolicy,
    *,
    endpoint: str,
    subject: str,
    origin: Origin,
    bound: BodyBound | None = None,
) -> requests.Session:
    """A requests session that keeps the store's credential on the way to ``endpoint``.

    ``subject`` starts the refusal's message (the store's description or its error
    subject); ``origin`` marks the error as this remote's. The caller adds its TLS
    (``verify``, ``cert``, adapters) as on any session. With ``bound``, every answer not
    asked for as a stream is read through it before the session hands it back (a stream, such
    as a watch, is its reader's to bound).
    """
    import requests

    class StoreSession(requests.Session):
        def get_redirect_target(self, resp: requests.Response) -> str | None:
            location = super().get_redirect_target(resp)
            if location is None:
                return None
            try:
                follow_or_refuse(
                    policy,
                    resp.status_code,
                    location,
                    here=resp.url or endpoint,
                    subject=subject,
                    origin=origin,
                )
            except RemoteError:
                resp.close()
                raise
            return location

    session = StoreSession()
    session.trust_env = False
    if bound is not None:
        session.hooks["response"].append(_bounded_reader(bound))
    if policy.use_proxy:
        session.proxies.update(requests.utils.get_environ_proxies(endpoint))
    else:
        note_ignored_proxy(subject)
    return session


def _bounded_reader(bound: BodyBound) -> Callable[..., requests.Response]:
    """A requests response hook that reads the body through ``bound``.

    requests runs response hooks before it reads a body it was not asked to stream, so the
    body is read here, in :data:`BODY_CHUNK` pieces (``iter_content`` turns a broken read into
    requests' own exceptions), and the session's later read finds it already held.
    """

    def read_within(response: requests.Response, *_args: Any, **kwargs: Any) -> requests.Response:
        if kwargs.get("stream"):
            return response
        try:
            bound.check_length(response.headers.get("Content-Length"))
            body = bound.read(response.iter_content(BODY_CHUNK))
        except BaseException:
            response.close()  # the connection is dropped, never pooled half-read
            raise
        response._content = body
        return response

    return read_within
