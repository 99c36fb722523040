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
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin, urlsplit

from dynconf.errors import Origin, Refusal, RemoteError

if TYPE_CHECKING:
    import requests

__all__ = [
    "THROTTLE_STATUSES",
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
    policy: HttpPolicy, *, endpoint: str, subject: str, origin: Origin
) -> requests.Session:
    """A requests session that keeps the store's credential on the way to ``endpoint``.

    ``subject`` starts the refusal's message (the store's description or its error
    subject); ``origin`` marks the error as this remote's. The caller adds its TLS
    (``verify``, ``cert``, adapters) as on any session.
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
    if policy.use_proxy:
        session.proxies.update(requests.utils.get_environ_proxies(endpoint))
    else:
        note_ignored_proxy(subject)
    return session
