"""The store vocabulary every store plugin and every caller shares.

A store plugin contributes a :class:`StoreType` (through the ``dynconf_stores`` hook): its
name, how it watches, the auth methods it accepts, a ``validate`` that returns refusals
(used by the agent at start *and* by the webhook at admission, so a store's rules live in
one place), a ``describe`` that never carries a credential, and a ``build`` that returns a
:class:`RemoteSource` (blocking) or :class:`AsyncRemoteSource`.

A fetch answers :class:`Fetched` (text, format, the store's revision when it counts one,
lease details when it hands out leases) or :data:`ABSENT` when the document is gone: a
deleted key is a state the agent's ``--on-delete`` policy acts on, not an error.

Watch health is reported through two optional attributes a source may expose, which the
agent sets before iterating ``changes``: ``on_failure(error)`` for every failure the watch
survives by retrying (it feeds ``watch_reconnects_total`` and the failure streak), and
``on_watching()`` each time the stream is (re)established (``watch_connected`` = 1). Use
:func:`report_failure` / :func:`report_watching` to call them when set, or inherit
:class:`SourceSupport` (in :mod:`dynconf.sources`), which does that and the rest every
source repeats.
"""

from __future__ import annotations

import functools
import inspect
import os
import random
import time
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from dynconf.errors import (
    AuthError,
    BackendError,
    DynconfError,
    Origin,
    Refusal,
    RemoteError,
)
from dynconf.sources import SourceSupport, report_failure, report_watching
from dynconf.store_http import http_setting_refusals

__all__ = [
    "ABSENT",
    "WATCH_FLOOR",
    "Absent",
    "AsyncRemoteSource",
    "AuthMethod",
    "Fetched",
    "Lease",
    "Pace",
    "RemoteSource",
    "SETTING",
    "SETTING_KINDS",
    "TLS_INPUTS",
    "SourceSupport",
    "COMMON_INPUTS",
    "StoreInput",
    "StoreSpec",
    "StoreType",
    "StoreTypeBase",
    "TlsSettings",
    "Returned",
    "Credential",
    "WatchCapability",
    "as_answer",
    "format_from_key",
    "flag_spelling",
    "format_refusals",
    "is_async_source",
    "keyword_spelling",
    "layered",
    "read_credential",
    "redact_url",
    "redact_url_list",
    "report_failure",
    "report_watching",
    "same_document",
    "setting_inputs",
    "toml_spelling",
]


class WatchCapability(StrEnum):
    """How a store learns about changes; decides whether the agent resyncs."""

    PUSH = "push"
    """The store pushes or holds a request open; the interval is a resync."""
    CONDITIONAL = "conditional"
    """A cheap "has it changed?" request each interval; the document only when it moved."""
    INTERVAL = "interval"
    """The whole document is re-read each interval."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease a store attached to a document (Vault dynamic secrets)."""

    lease_id: str
    ttl_seconds: float
    renewable: bool

    def __repr__(self) -> str:
        return f"Lease(ttl_seconds={self.ttl_seconds}, renewable={self.renewable})"


@dataclass(frozen=True, slots=True)
class Fetched:
    """One document as a store answered it.

    ``format`` is a format name (``json``, ``toml``, …). ``revision`` is the store's own
    change marker (Consul index, etcd revision, Vault version, ETag, commit), ``None`` when
    the store counts none. ``repr`` never shows the text.
    """

    text: str
    format: str
    revision: str | None = None
    lease: Lease | None = None

    @property
    def numeric_revision(self) -> int | None:
        """The revision as an integer when the store counts (for the generation gauge)."""
        if self.revision is not None and self.revision.isdigit():
            return int(self.revision)
        return None

    def __repr__(self) -> str:
        return (
            f"Fetched(format={self.format!r}, bytes={len(self.text.encode())}, "
            f"revision={self.revision!r})"
        )


class Absent:
    """The store answered that the document is not there (deleted, purged, never written)."""

    _instance: Absent | None = None

    def __new__(cls) -> Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Final = Absent()


def same_document(left: Fetched | Absent, right: Fetched | Absent) -> bool:
    """Whether two answers hold the same document: both absent, or same text and format.

    The one comparison every watch, follower and server uses to decide that nothing changed.
    """
    if isinstance(left, Absent) or isinstance(right, Absent):
        return left is right
    return left.text == right.text and left.format == right.format


Answer = Fetched | Absent


Returned = Fetched | Absent | tuple[str, str]
"""What a source's ``fetch`` may answer: :class:`Fetched`, :data:`ABSENT`, or the book's
``(text, format)`` pair (``format`` a :class:`dynconf.remote.Format` member or its name)."""


def as_answer(returned: Returned | object) -> Fetched | Absent:
    """Normalise what a ``fetch`` returned into :class:`Fetched` or :data:`ABSENT`.

    The one place a ``(text, format)`` pair becomes a :class:`Fetched`: the format name is
    checked against the format registry (so a plugin's format is accepted and a typo is
    refused by name), and anything else is a :class:`BackendError` saying what to return.
    """
    if isinstance(returned, Fetched | Absent):
        return returned
    if (
        isinstance(returned, tuple)
        and len(returned) == 2
        and isinstance(returned[0], str)
        and isinstance(returned[1], str)
    ):
        from dynconf.plugins import default_registry

        text, named = returned
        chosen = default_registry().format_named(str(getattr(named, "value", named)))
        return Fetched(text, chosen.name)
    raise BackendError(
        f"a remote source's fetch() returned a {type(returned).__name__}; return "
        "(text, Format.JSON), a Fetched or ABSENT"
    )


def _answering(fetch: Callable[..., object]) -> Callable[..., object]:
    """``fetch`` wrapped so its answer goes through :func:`as_answer` (sync or async)."""
    if inspect.iscoroutinefunction(fetch):

        @functools.wraps(fetch)
        async def fetch_async(self: object) -> Fetched | Absent:
            return as_answer(await fetch(self))

        fetch_async.__answering__ = True  # type: ignore[attr-defined]
        return fetch_async

    @functools.wraps(fetch)
    def fetch_sync(self: object) -> Fetched | Absent:
        return as_answer(fetch(self))

    fetch_sync.__answering__ = True  # type: ignore[attr-defined]
    return fetch_sync


def _wrap_fetch(cls: type) -> None:
    """Route a concrete subclass's own ``fetch`` through :func:`as_answer`, once."""
    if cls.__dict__.get("_is_protocol"):
        return
    fetch = cls.__dict__.get("fetch")
    if callable(fetch) and not getattr(fetch, "__answering__", False):
        type.__setattr__(cls, "fetch", _answering(fetch))


@runtime_checkable
class RemoteSource(Protocol):
    """A blocking store client. Runs in a worker thread when driven from async code.

    Two ways to be one. A store package's source matches it structurally (it has these
    members). Or, as the book writes a store in Python, a class *subclasses* it and
    implements :meth:`fetch` and :meth:`describe`; it then inherits an interval watch
    (:meth:`changes` re-reads each interval and yields when the document moved), a no-op
    :meth:`close` and ``capability = interval``, and its ``fetch`` may return
    ``(text, Format.JSON)``: the base class turns that into :class:`Fetched`, so every
    caller (the engine, the agent, the config server) sees the one answer type.
    """

    capability: WatchCapability = WatchCapability.INTERVAL

    if not TYPE_CHECKING:  # a protocol member to mypy otherwise; runtime-only behaviour

        def __init_subclass__(cls, **kwargs: object) -> None:
            super().__init_subclass__(**kwargs)
            _wrap_fetch(cls)

    @abstractmethod
    def fetch(self) -> Fetched | Absent:
        """Read the document now; raise :class:`RemoteError` or :class:`AuthError`.

        A subclass may return ``(text, format)`` instead (see :data:`Returned`).
        """
        ...

    @abstractmethod
    def describe(self) -> str:
        """Store kind, address and key; never a credential."""
        ...

    def changes(self, interval: float, stop: Callable[[], bool]) -> Iterator[Fetched | Absent]:
        """Yield each new document (or ABSENT) as the store reports it, until ``stop()``.

        Push stores yield from their stream; conditional and interval stores ask each
        ``interval`` seconds and yield only when the document moved. The first observation
        primes the marker and yields nothing. Transport failures are retried inside with
        backoff; only a refusal that cannot heal (auth, a gone bucket) is raised.

        The inherited body is the interval watch: re-read each paced ``interval``.
        """
        pace = Pace(interval)
        last: Fetched | Absent | None = None
        while not stop():
            try:
                answer = self.fetch()
            except Exception as error:
                if not is_retryable(error):
                    raise
                report_failure(self, error)
                pace.failed()
            else:
                pace.succeeded()
                report_watching(self)
                if last is not None and not same_document(last, answer):
                    yield answer
                last = answer
            if SourceSupport.pause(pace.next_wait(), stop):
                return

    def close(self) -> None:
        """Release connections; the source is not used afterwards."""
        return


@runtime_checkable
class AsyncRemoteSource(Protocol):
    """An async store client; runs on the event loop.

    Subclassable like :class:`RemoteSource`: implement ``async def fetch`` (which may
    return ``(text, Format.JSON)``) and :meth:`describe`; the interval :meth:`changes` and a
    no-op :meth:`aclose` are inherited.
    """

    capability: WatchCapability = WatchCapability.INTERVAL

    if not TYPE_CHECKING:  # a protocol member to mypy otherwise; runtime-only behaviour

        def __init_subclass__(cls, **kwargs: object) -> None:
            super().__init_subclass__(**kwargs)
            _wrap_fetch(cls)

    @abstractmethod
    async def fetch(self) -> Fetched | Absent: ...

    @abstractmethod
    def describe(self) -> str: ...

    async def changes(self, interval: float) -> AsyncIterator[Fetched | Absent]:
        """Async twin of :meth:`RemoteSource.changes`; cancelled by cancelling the task."""
        import anyio

        pace = Pace(interval)
        last: Fetched | Absent | None = None
        while True:
            try:
                answer = await self.fetch()
            except Exception as error:
                if not is_retryable(error):
                    raise
                report_failure(self, error)
                pace.failed()
            else:
                pace.succeeded()
                report_watching(self)
                if last is not None and not same_document(last, answer):
                    yield answer
                last = answer
            await anyio.sleep(pace.next_wait())

    async def aclose(self) -> None:
        return None


def layered(
    answers: Sequence[Fetched | Absent], *, revision: str | None, origin: Origin
) -> Fetched | Absent:
    """Several keys read at one instant, as one document: later keys win, table by table.

    A key that is not there contributes nothing; when none is there the document is
    :data:`ABSENT`. The merged document is JSON (each key keeps its own format until the
    merge); ``revision`` is the store's one marker for the instant all keys were read at.
    """
    from dynconf.document import deep_merge
    from dynconf.formats import dump_document, parse_text

    present = [answer for answer in answers if isinstance(answer, Fetched)]
    if not present:
        return ABSENT
    merged: dict[str, object] = {}
    for answer in present:
        deep_merge(merged, parse_text(answer.text, answer.format, origin))
    return Fetched(dump_document(merged, "json"), "json", revision)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Transport trust for a store client: files only, read when the client is built.

    A client certificate without its key (or the reverse) is refused by :meth:`problems`.
    ``skip_verify`` exists because the agent's contract has ``--tls-skip-verify``; it is
    loud in logs and a gauge, never a default.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    skip_verify: bool = False

    @property
    def configured(self) -> bool:
        return any((self.ca_file, self.cert_file, self.key_file, self.server_name)) or (
            self.skip_verify
        )

    def problems(self) -> list[Refusal]:
        """Refusals for combinations no client can honour."""
        out: list[Refusal] = []
        if self.cert_file and not self.key_file:
            out.append(
                Refusal("tls.key_file", "{field:tls.cert_file} needs {field}: a client "
                        "certificate is useless without its key", words=True)
            )  # fmt: skip
        if self.key_file and not self.cert_file:
            out.append(
                Refusal("tls.cert_file", "{field:tls.key_file} needs {field}", "name the "
                        "certificate the key belongs to", words=True)
            )  # fmt: skip
        if self.skip_verify and self.ca_file:
            out.append(
                Refusal("tls.skip_verify", "{field} and {field:tls.ca_file} contradict each "
                        "other", "keep {field:tls.ca_file} to verify the store against the "
                        "private CA")
            )  # fmt: skip
        return out

    def trust_files(self) -> list[str]:
        """The files whose change means the client must be rebuilt."""
        return [f for f in (self.ca_file, self.cert_file, self.key_file) if f]


@dataclass(frozen=True, slots=True)
class AuthMethod:
    """One way a store accepts a credential, and which inputs it needs.

    ``needs`` names spec fields (``auth_role``, ``auth_mount``, ``auth_username``,
    ``token``, ``password``, ``tls.cert_file``, ``ssh_key``) that must be present.
    """

    name: str
    needs: tuple[str, ...] = ()
    summary: str = ""


Credential = str | Callable[[], str]
"""A secret, or a callable that answers it: stores call it again at every login or
connection (a rotated token file, a renewed workload identity), never once at build."""


def read_credential(credential: Credential | None, name: str = "token") -> str | None:
    """The credential's value now: calls a callable, passes a string through.

    A callable that raises or answers something other than a string is an
    :class:`AuthError` naming the argument, never the value.
    """
    if credential is None or isinstance(credential, str):
        return credential
    try:
        value = credential()
    except Exception as exc:
        raise AuthError(
            f"the {name} callable raised {type(exc).__name__}; fix what it reads (a token "
            "file, a metadata endpoint)"
        ) from exc
    if not isinstance(value, str):
        raise AuthError(
            f"the {name} callable answered a {type(value).__name__}, not a str; return the "
            "credential's text"
        )
    return value


@dataclass(frozen=True)
class StoreSpec:
    """Everything needed to build one store client, in the agent's vocabulary.

    Secrets (``token``, ``password``) are read from the environment
    (``DYNAMIC_CONFIG_AGENT_TOKEN`` / ``DYNAMIC_CONFIG_AGENT_PASSWORD``) or from files by
    the caller; ``repr`` never shows them.
    """

    source: str
    endpoint: str
    key: str
    section: str | None = None
    auth: str | None = None
    auth_mount: str | None = None
    auth_role: str | None = None
    auth_username: str | None = None
    auth_token_path: str | None = None
    timeout: float | None = None
    dynamic: bool = False
    tls: TlsSettings = field(default_factory=TlsSettings)
    token: Credential | None = field(default=None, repr=False)
    password: Credential | None = field(default=None, repr=False)
    extra: Mapping[str, str] = field(default_factory=dict)
    """The store's settings: its plain ones (``format``, consul's ``datacenter``) and its
    declared setting inputs (git's ``ref``, s3's ``api_url``, vault's ``namespace``), each
    checked by the store that declares it (:class:`StoreTypeBase`)."""
    keys: tuple[str, ...] = ()
    """Several keys read at one instant as one document (later keys win), where the store
    can (etcd, consul); empty: the one ``key``. ``key`` is then the first of them."""
    max_bytes: int | None = None
    """The document ceiling the render holds the read text to (``--max-document-bytes``),
    passed on so a store that learns a value's size before reading it (redis ``STRLEN``,
    an S3 object's length) refuses one past it without holding it: a value read whole
    first can cost a small pod its memory limit before the engine measures it. ``None``:
    the engine's 8 MiB default."""
    state_dir: str | None = None
    """A directory the caller owns and can write, where the store may keep private state
    between calls (git's clone cache); ``None``: the store's own default. The agent points
    it at the rendered volume, the only place its pod lets it write."""

    @classmethod
    def from_inputs(cls, *, extra: Mapping[str, str] | None = None, **inputs: Any) -> StoreSpec:
        """A spec from named inputs, each routed to its home: a field of this class is set,
        any other name (a store's setting input: ``ref``, ``api_url``, ``token_header``) joins
        ``extra`` as text; ``None`` is left out. Every front end that reads inputs by name (the
        agent's flags, admission, the config server's tables, the library constructors)
        builds its spec here, so none of them lists which store owns which input."""
        own: dict[str, Any] = {}
        settings = dict(extra or {})
        for name, value in inputs.items():
            if name in _SPEC_FIELDS:
                own[name] = value
            elif value is not None:
                settings[name] = str(value)
        return cls(**own, extra=settings)

    def setting(self, name: str) -> str | None:
        """A setting's text, or ``None`` when unset (``spec.setting("ref")``)."""
        return self.extra.get(name)

    def with_secrets_from_env(self, environ: Mapping[str, str] | None = None) -> StoreSpec:
        """Fill ``token`` / ``password`` / ``endpoint`` from the agent's environment names."""
        env = os.environ if environ is None else environ
        token = self.token or env.get("DYNAMIC_CONFIG_AGENT_TOKEN") or None
        password = self.password or env.get("DYNAMIC_CONFIG_AGENT_PASSWORD") or None
        endpoint = self.endpoint or env.get("DYNAMIC_CONFIG_AGENT_ENDPOINT", "")
        if (token, password, endpoint) == (self.token, self.password, self.endpoint):
            return self  # frozen: the same spec (admission checks every agent it injects)
        return replace(self, token=token, password=password, endpoint=endpoint)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in ("source", "key", "section", "auth", "auth_mount", "auth_role")
            if getattr(self, name) is not None
        )
        return f"StoreSpec({shown}, endpoint={redact_url(self.endpoint)!r})"


class StoreType(Protocol):
    """What a store plugin contributes through the ``dynconf_stores`` hook."""

    name: str
    capability: WatchCapability
    auth_methods: Mapping[str, AuthMethod]

    @property
    def inputs(self) -> tuple[StoreInput, ...]:
        """The store's own inputs beyond :data:`COMMON_INPUTS`, declared by the store."""
        ...

    def validate(self, spec: StoreSpec) -> list[str]:
        """Every refusal for this spec, each a sentence that names the fix; ``[]`` if fine."""
        ...

    def refusals(self, spec: StoreSpec) -> list[Refusal]:
        """The same refusals as data, for a front end that spells fields its own way."""
        ...

    def describe(self, spec: StoreSpec) -> str:
        """Store kind, address (redacted) and key; never a credential."""
        ...

    def build(self, spec: StoreSpec) -> RemoteSource | AsyncRemoteSource:
        """A client for ``spec``; imports the client library here, not at discovery."""
        ...


def format_from_key(key: str) -> str | None:
    """The format a store key's last extension names (case-insensitive), or ``None``.

    Asked of the process's format registry, so a plugin's format is named by its key too.
    """
    from dynconf.plugins import default_registry  # plugins imports this module

    name = key.rsplit("/", 1)[-1]
    if "." not in name:
        return None
    found = default_registry().format_for_extension(name.rsplit(".", 1)[-1])
    return found.name if found is not None else None


def format_refusals(
    store: str, key: str, chosen: str | None, *, noun: str = "key", example: str = "json"
) -> list[Refusal]:
    """The refusals of a store document's format: the key's extension or ``format=``.

    Every store that reads one document from a key names its format the same way, with the
    formats the process can read (the registry's, a plugin's included).
    """
    from dynconf.plugins import default_registry

    registry = default_registry()
    if chosen is None:
        if format_from_key(key) is not None:
            return []
        extensions = [f".{ext}" for fmt in registry.formats.values() for ext in fmt.extensions[:1]]
        listed = ", ".join(extensions[:-1]) + f" or {extensions[-1]}"
        return [
            Refusal("key", f"the {store} key {key} has no extension naming the stored format",
                    f"name the {noun} with {listed}, or set the format setting "
                    f"(format={example})", words=True)
        ]  # fmt: skip
    if chosen.lower() not in registry.formats:
        return [
            Refusal(f"{SETTING}format", f"format={chosen} is not a format {store} documents "
                    "can be stored in", f"use one of: {', '.join(registry.formats)}",
                    words=True)
        ]  # fmt: skip
    return []


def redact_url(url: str, *, lone_is_username: bool = False) -> str:
    """Hide the credential in a URL's userinfo, even when the URL does not parse.

    Splits on the *last* ``@`` (passwords may contain ``@``).
    ``user:pass@host`` becomes ``user:…@host``; a lone ``x@host`` becomes ``…@host``, or
    ``x:…@host`` when the store uses a lone name as the username (Redis, config server).
    """
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at == -1:
        return url
    userinfo, host = rest[:at], rest[at + 1 :]
    user, colon, _secret = userinfo.partition(":")
    if colon:
        shown = f"{user}:…"
    elif lone_is_username:
        shown = f"{userinfo}:…"
    else:
        shown = "…"
    return f"{scheme}://{shown}@{host}"


def redact_url_list(urls: str, *, lone_is_username: bool = False) -> str:
    """Redact each URL of a comma-separated list (NATS server lists)."""
    return ",".join(
        redact_url(part.strip(), lone_is_username=lone_is_username) for part in urls.split(",")
    )


WATCH_FLOOR: Final = 0.5
"""Fewest seconds between the starts of two requests of one watch (at most 2 a second).

A store that answers at once when it should hold the request (a Consul blocking query whose
index did not move, a listener that closes as soon as it opens) or an interval set near zero
must not turn a watch into a request storm against it.
"""


@dataclass
class Pace:
    """Backoff for retries: the interval while healthy, doubling per failure up to 300 s.

    Every wait is spread by up to ±25 % so a fleet does not retry in step. A success
    resets the streak. No wait is shorter than ``floor`` (:data:`WATCH_FLOOR`), and a loop
    that sends its next request without waiting (a blocking query, a stream re-opened at
    once) asks :meth:`until_next` first, so a watch whose answers bring nothing new keeps
    its requests ``floor`` apart. An answer that brought something new (a moved index) is
    acted on at once: the request after it is not held (``until_next(fresh=True)``).
    """

    interval: float
    ceiling: float = 300.0
    spread: float = 0.25
    failures: int = 0
    floor: float = WATCH_FLOOR
    _random: random.Random = field(
        default_factory=lambda: random.Random(os.getpid())  # noqa: S311 - jitter, not crypto
    )
    _last_start: float | None = field(default=None, repr=False)

    def succeeded(self) -> None:
        self.failures = 0

    def failed(self) -> None:
        self.failures += 1

    def base(self) -> float:
        grown = (
            self.interval * float(2 ** min(self.failures, 16)) if self.failures else self.interval
        )
        return max(self.floor, min(grown, self.ceiling))

    def next_wait(self) -> float:
        base = self.base()
        return max(self.floor, base * (1 + self._random.uniform(-self.spread, self.spread)))

    def steady(self) -> float:
        """The healthy wait without jitter (a poller that keeps a flat period): never under
        the floor."""
        return max(self.floor, self.interval)

    def until_next(self, *, fresh: bool = False) -> float:
        """Seconds to wait so the coming request starts ``floor`` after the previous one.

        Books the coming request's start, so a loop calls it once per request, right before
        sending; the first call answers 0. ``fresh``: the previous answer brought something
        new (Consul's rule for blocking queries is to back off only on an index that did
        not move), so the request goes now; a store answering at once with nothing new is
        still held to one request per ``floor``.
        """
        now = time.monotonic()
        held = self._last_start is not None and not fresh
        start = max(now, self._last_start + self.floor) if held else now  # type: ignore[operator]
        self._last_start = start
        return start - now


def is_async_source(source: RemoteSource | AsyncRemoteSource) -> bool:
    """Whether a source's ``fetch`` is a coroutine function (it runs on the event loop)."""
    return inspect.iscoroutinefunction(source.fetch)


def is_retryable(error: BaseException) -> bool:
    """Whether a loop should back off and retry (remote) or stop and report (auth, others)."""
    if isinstance(error, AuthError):
        return False
    return isinstance(error, RemoteError) or not isinstance(error, DynconfError)


def credential_from_file(path: str | os.PathLike[str]) -> str:
    """Read a token file (re-read at every login); strips one trailing newline."""
    text = Path(path).read_text(encoding="utf-8")
    return text[:-1] if text.endswith("\n") else text


@dataclass(frozen=True, slots=True)
class StoreInput:
    """An input a store declares beyond the common spec: its field, its kind, secret or not.

    Either a :class:`StoreSpec` field (``ref``, ``api_url``), or, for an input no field
    holds (a tenth store's ``token_header``), a *setting input*: carried in
    ``StoreSpec.extra`` under its own name and accepted by every front end in its own
    spelling (``--token-header``, ``dynamic-config.rs/token-header``, the volume attribute
    ``token-header``, ``token_header =`` in TOML, ``token_header=`` in Python), with no row
    added anywhere. A store that does not declare an input refuses it when set, and the
    refusal names the stores that do. Which auth method needs which input is the
    :class:`AuthMethod`'s ``needs`` (the one home of it).
    """

    name: str
    kind: str = "text"
    """``text``, ``url``, ``path`` (a file the caller mounts), ``switch`` or ``list``; a
    setting input is ``text``, ``url``, ``path`` or ``switch`` (``true``/``false``)."""
    secret: bool = False
    """Whether the value is a credential (never quoted, never an argument). A setting input
    cannot be secret: front ends pass settings as arguments, so a store takes a credential
    as ``token`` or ``password``, or as a ``path`` to a file the caller mounts."""
    summary: str = ""

    @property
    def is_setting(self) -> bool:
        """Whether no :class:`StoreSpec` field holds it, so ``StoreSpec.extra`` carries it."""
        return self.name not in _SPEC_FIELDS


_SPEC_FIELDS: Final = frozenset(spec_field.name for spec_field in fields(StoreSpec))

SETTING_KINDS: Final = ("text", "url", "path", "switch")
"""The kinds a setting input may be: what every front end can pass as one argument."""


def setting_inputs(store: StoreType | StoreTypeBase) -> tuple[StoreInput, ...]:
    """The store's declared inputs that ``StoreSpec.extra`` carries (see :class:`StoreInput`)."""
    return tuple(declared for declared in store.inputs if declared.is_setting)


COMMON_INPUTS: Final = frozenset(
    {
        "source", "endpoint", "key", "section", "auth", "auth_mount", "auth_role",
        "auth_username", "auth_token_path", "timeout", "tls", "token", "password", "extra",
        "state_dir", "max_bytes",
    }
)  # fmt: skip
"""The :class:`StoreSpec` fields every store reads; any other field is a store's own input,
taken only by the stores whose ``inputs`` declare it."""

_FLAG_SPELLING: Final = {
    "token": "a token (DYNAMIC_CONFIG_AGENT_TOKEN)",
    "password": "a password (DYNAMIC_CONFIG_AGENT_PASSWORD)",
    "tls.cert_file": "--tls-cert",
    "tls.key_file": "--tls-key",
    "tls.ca_file": "--ca",
    "tls.server_name": "--tls-server-name",
    "tls.skip_verify": "--tls-skip-verify",
    "keys": "several keys (keys=[...])",
}
_KEYWORD_SPELLING: Final = {
    "dynamic": "dynamic=True",
    "keys": "keys=[...]",
}


TLS_INPUTS: Final = (
    "{field:tls.ca_file}, {field:tls.cert_file+tls.key_file}, {field:tls.server_name}, "
    "{field:tls.skip_verify}"
)
"""Every TLS input, marked for :meth:`Refusal.render` (``--ca, --tls-cert and --tls-key, …``)."""

SETTING: Final = "extra."
"""How a refusal's ``field`` names a store setting (a key of ``StoreSpec.extra``):
``extra.datacenter``. Settings have no flag or annotation; every vocabulary says the name."""


def flag_spelling(field_name: str) -> str:
    """An input as the agent's command line (and environment) spells it: ``--auth-role``."""
    if field_name.startswith(SETTING):
        return field_name.removeprefix(SETTING)
    return _FLAG_SPELLING.get(field_name) or "--" + field_name.replace("_", "-")


def keyword_spelling(field_name: str) -> str:
    """An input as a Python constructor spells it: ``auth_role=``, ``tls=TlsSettings(ca_file=)``."""
    if field_name.startswith("tls."):
        return f"tls=TlsSettings({field_name.removeprefix('tls.')}=)"
    if field_name.startswith(SETTING):
        return f"{field_name.removeprefix(SETTING)}="
    return _KEYWORD_SPELLING.get(field_name) or f"{field_name}="


def toml_spelling(field_name: str) -> str:
    """An input as a TOML ``[remote]`` table spells it: the field's own name (a setting's own
    key)."""
    return field_name.removeprefix(SETTING)


def _declares(store: StoreType | StoreTypeBase, name: str) -> bool:
    return any(declared.name == name for declared in store.inputs)


def _owners(name: str) -> list[str]:
    """The loaded stores that declare an input, for a refusal that says whose it is."""
    from dynconf.plugins import default_registry  # plugins imports this module

    stores = default_registry().stores.values()
    return sorted(store.name for store in stores if _declares(store, name))


_SWITCH_WORDS: Final = frozenset({"true", "false", "yes", "no", "1", "0", "on", "off"})


class StoreTypeBase:
    """Shared validation for store types: subclasses declare, then add their own rules.

    The base refuses flags that belong to another store, unknown auth methods, auth methods
    missing an input they need, and TLS combinations no client can honour. A subclass sets
    the class attributes and overrides :meth:`store_refusals`, :meth:`describe` and
    :meth:`build`.
    """

    name: str = ""
    capability: WatchCapability = WatchCapability.INTERVAL
    auth_methods: Mapping[str, AuthMethod] = {}
    default_auth: str | None = None
    """The method used when ``--auth`` is absent; ``None`` means ``--auth`` is not accepted."""

    inputs: tuple[StoreInput, ...] = ()
    """The store's own inputs beyond :data:`COMMON_INPUTS` (git's ``ref``, s3's ``api_url``)."""
    settings: tuple[str, ...] = ()
    """The ``StoreSpec.extra`` keys the store reads that no front end spells (``format``,
    consul's ``datacenter``); any other key that is not a setting input is refused here."""

    def validate(self, spec: StoreSpec) -> list[str]:
        """Every refusal, each a sentence in the agent's flag vocabulary."""
        return [refusal.render(flag_spelling) for refusal in self.refusals(spec)]

    def refusals(self, spec: StoreSpec) -> list[Refusal]:
        """Every refusal as data; each front end renders the field in its own vocabulary.

        The base rules, then the store's own (:meth:`store_refusals`): one list, one type.
        """
        return [
            *self._foreign_inputs(spec),
            *self._setting_input_refusals(spec),
            *self._method_refusals(spec),
            *spec.tls.problems(),
            *http_setting_refusals(self.name, spec.extra),
            *self.store_refusals(spec),
        ]

    def _foreign_inputs(self, spec: StoreSpec) -> list[Refusal]:
        """Inputs this store does not take: another store's field, or a setting it does not
        read (another store's setting input, or a name nobody declares)."""
        out: list[Refusal] = []
        for spec_field in fields(StoreSpec):
            name = spec_field.name
            if name in COMMON_INPUTS or _declares(self, name) or not getattr(spec, name):
                continue
            out.append(self._foreign(name))
        mine = (*self.settings, *(declared.name for declared in setting_inputs(self)))
        for name in sorted(set(spec.extra) - set(mine)):
            if _owners(name):
                out.append(self._foreign(name))
                continue
            known = ", ".join(mine)
            fix = f"use one of: {known}" if known else f"{self.name} takes no settings"
            out.append(Refusal(f"{SETTING}{name}", f"{{field}} is not a setting {self.name} "
                               "reads", fix))  # fmt: skip
        return out

    def _foreign(self, name: str) -> Refusal:
        owners = _owners(name)
        problem = f"is {' and '.join(owners)}'s" if owners else f"is no {self.name} input"
        return Refusal(name, problem, f"remove it for a {self.name} source")

    def _setting_input_refusals(self, spec: StoreSpec) -> list[Refusal]:
        """What every declared setting input must be (one line of text; a switch true or
        false), so no front end and no store repeats it; what a url or path must look like is
        the declaring store's own rule."""
        out: list[Refusal] = []
        for declared in setting_inputs(self):
            value = spec.extra.get(declared.name)
            if value is None:
                continue
            if not value.strip() or any(not char.isprintable() for char in value):
                out.append(Refusal(declared.name, "{field} is empty or holds a control "
                                   "character", "give one line of text, or omit it"))  # fmt: skip
            elif declared.kind == "switch" and value.strip().lower() not in _SWITCH_WORDS:
                out.append(Refusal(declared.name, "{field} must be true or false",
                                   "leave it out to keep the default"))  # fmt: skip
        return out

    def _method_refusals(self, spec: StoreSpec) -> list[Refusal]:
        out: list[Refusal] = []
        if spec.auth is not None and not self.auth_methods:
            out.append(
                Refusal(
                    "auth",
                    f"{self.name} takes no {{field}}",
                    f"its credentials come from {self.credential_hint()}",
                )
            )
        elif spec.auth is not None and spec.auth not in self.auth_methods:
            known = ", ".join(sorted(self.auth_methods))
            out.append(
                Refusal("auth", f"{{field}} {spec.auth} is not a {self.name} method",
                        f"use one of: {known}")
            )  # fmt: skip
        method_name = spec.auth if spec.auth is not None else self.default_auth
        method = self.auth_methods.get(method_name) if method_name else None
        if method is not None:
            for need in method.needs:
                if not self._has(spec, need):
                    both = "{field:tls.cert_file+tls.key_file}" if need == "tls.cert_file" else ""
                    out.append(
                        Refusal(need, f"{self.name} auth {method.name} needs {both or '{field}'}",
                                words=bool(both))
                    )  # fmt: skip
        return out

    @staticmethod
    def _has(spec: StoreSpec, need: str) -> bool:
        if need == "tls.cert_file":
            return bool(spec.tls.cert_file and spec.tls.key_file)
        return bool(getattr(spec, need, None) or spec.extra.get(need))

    def credential_hint(self) -> str:
        """Where this store's credentials come from, for a refusal's fix (override per store;
        name inputs with :class:`Refusal` marks, ``{field:auth_username}``)."""
        return "its endpoint and the environment"

    def store_refusals(self, spec: StoreSpec) -> Sequence[Refusal]:
        """The store's own rules (key shape, URL scheme, TLS it cannot honour), as data: each
        names the :class:`StoreSpec` field it is about, which is what admission decides by."""
        return []

    def describe(self, spec: StoreSpec) -> str:
        return f"{self.name} {redact_url(spec.endpoint)} key {spec.key}"

    def build(self, spec: StoreSpec) -> RemoteSource | AsyncRemoteSource:
        raise NotImplementedError

    def admit(self, spec: StoreSpec, *, unusable: str | None = None) -> str:
        """The start of every :meth:`build`: refuse what :meth:`validate` refuses.

        ``build`` may be called without ``validate`` (a library caller), so it re-checks and
        raises :class:`BackendError` naming every refusal, from the described remote.
        ``unusable`` is the refusal to give when ``validate`` passed but the store still
        cannot use the spec (an endpoint its parser gave up on). Returns the description.
        """
        description = self.describe(spec)
        refusals = self.validate(spec)
        if refusals or unusable:
            raise BackendError(
                "; ".join(refusals) or str(unusable), origin=Origin.remote(description)
            )
        return description
