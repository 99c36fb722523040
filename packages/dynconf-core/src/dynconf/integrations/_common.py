"""The framework-independent half of every integration, written once.

* :class:`Lifecycle` — init, follow (files and remote store) and stop, tied to an
  application's start and end. Leased per configuration: however many applications (or
  test clients, or ``uvicorn --reload`` rebuilds) start one configuration, one watcher
  runs, and the last one to stop stops it. Fork-aware: a child process (gunicorn
  ``--preload``, a Celery prefork worker) keeps the parent's snapshot but none of its
  threads, so :meth:`Lifecycle.ensure` re-arms the follow in the child, without reloading.
* :class:`RequestSnapshot` — one consistent read of every configuration a request may use,
  taken when the request begins and held in a :class:`~contextvars.ContextVar` for its
  length, so a reload landing mid-request cannot show one request two generations.
  ``contextvars`` because every shape served here propagates it: an asyncio task, a
  threadpool worker (Starlette copies the context), a WSGI thread, a Celery task.
* :func:`readiness` / :func:`liveness` and the route table :func:`routes` — the JSON each
  adapter serves at ``/readyz`` and ``/healthz`` (generations, counts, kinds and paths;
  never a value), ``/metrics`` when ``prometheus-client`` is installed, and the guarded
  diagnostics ``/_config/check`` and ``/_config/explain/{path}``. An adapter only
  translates a :class:`Reply` into its framework's response, asking :func:`reply_to` (a
  blocking adapter) or :func:`reply_to_async` (an async one) for it.
* :class:`BlueprintExtension` — Flask's and Quart's extension object, one shape in both
  frameworks: the lifecycle, the request snapshot on ``g``, the routes as a blueprint
  (:class:`BlueprintFactory`). Each adapter says only how its views answer and when its
  app starts the lifecycle.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypedDict, TypeVar, Unpack, cast

import anyio.to_thread

from dynconf.concurrency import run_blocking
from dynconf.config import DynamicConfig
from dynconf.errors import DynconfError, NotInitialisedError
from dynconf.group import ConfigGroup
from dynconf.watch import DEFAULT_DEBOUNCE

__all__ = [
    "BlueprintExtension",
    "BlueprintFactory",
    "Guard",
    "FollowOptions",
    "Handler",
    "Lifecycle",
    "Options",
    "OutsideRequestError",
    "Reply",
    "RequestSnapshot",
    "RouteOptions",
    "Route",
    "Target",
    "current",
    "enter",
    "leave",
    "lifecycle_of",
    "liveness",
    "missing",
    "readiness",
    "reply_to",
    "reply_to_async",
    "request_snapshot",
    "routes",
    "scoped",
    "take_snapshot",
    "token_guard",
    "wire",
]

M = TypeVar("M")
Target = DynamicConfig[Any] | ConfigGroup
Guard = Callable[[Mapping[str, str]], bool]
"""Who may call the diagnostics routes: takes the request's headers (lower-case names)."""

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


def missing(framework: str, extra: str, error: ImportError) -> ImportError:
    """The error an adapter raises when its framework is not installed: what, and the fix."""
    return ImportError(
        f"dynconf.integrations.{extra} adapts {framework}, which is not installed "
        f"({error.name or error}); install it with: pip install 'dynconf-core[{extra}]'"
    )


def members(targets: Iterable[Target]) -> tuple[DynamicConfig[Any], ...]:
    """Every configuration in ``targets``, groups flattened; one key appears once."""
    configs: list[DynamicConfig[Any]] = []
    for target in targets:
        configs.extend(target.configs if isinstance(target, ConfigGroup) else (target,))
    keys = [config.key for config in configs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(
            f"two configurations share the key {', '.join(map(repr, repeated))}; a request "
            "snapshot and the readiness report are keyed by it, so give each its own key"
        )
    return tuple(configs)


# ---------------------------------------------------------------------- request snapshot
class OutsideRequestError(RuntimeError):
    """A scoped read with no request (or task) scope open on this thread or task."""


class RequestSnapshot:
    """The models (and their generations) one request sees, read once when it began.

    Built on every request, so a slotted class rather than a frozen dataclass (whose
    ``__init__`` costs an ``object.__setattr__`` per field); treat it as immutable."""

    __slots__ = ("configs", "generations", "models")

    def __init__(
        self,
        models: Mapping[str, Any],
        generations: Mapping[str, int],
        configs: Mapping[str, DynamicConfig[Any]],
    ) -> None:
        self.models = models
        self.generations = generations
        self.configs = configs

    def __repr__(self) -> str:
        return f"<RequestSnapshot generations={dict(self.generations)}>"

    def of(self, config: DynamicConfig[M]) -> M:
        """The model ``config`` had when the request began."""
        model = self.models.get(config.key, _MISSING)
        if model is _MISSING or self.configs.get(config.key) is not config:
            raise OutsideRequestError(
                f"the configuration `{config.key}` is not in this request's snapshot; "
                "the integration snapshots the configurations it was set up with, so "
                "pass this one to it too"
            )
        if model is None:
            # nothing was installed when the request began: the same error current() gives
            return config.current()
        return model  # type: ignore[no-any-return]

    def __getitem__(self, key: str) -> Any:
        if key not in self.models:
            carried = ", ".join(map(repr, self.models)) or "nothing"
            raise KeyError(f"{key!r} is not in this request's snapshot; it carries {carried}")
        return self.of(self.configs[key])

    def one(self) -> Any:
        """The model, when the integration was given exactly one configuration."""
        if len(self.models) != 1:
            raise LookupError(
                f"this snapshot carries {len(self.models)} configurations "
                f"({', '.join(map(repr, self.models))}); read one by key: snapshot[key]"
            )
        return self[next(iter(self.models))]

    @property
    def generation(self) -> int:
        """The generation, when the snapshot carries exactly one configuration."""
        if len(self.generations) != 1:
            raise LookupError("this snapshot carries several generations; use .generations")
        return next(iter(self.generations.values()))


_MISSING: Any = object()
_ATTEMPTS = 8
_SNAPSHOT: ContextVar[RequestSnapshot | None] = ContextVar("dynconf_request", default=None)


def _views(targets: tuple[Target, ...]) -> dict[str, tuple[Any, int] | None]:
    views: dict[str, tuple[Any, int] | None] = {}
    for target in targets:
        if isinstance(target, ConfigGroup):
            views.update(target.views())  # consistent across an atomic group reload
        else:
            views[target.key] = target.view()
    return views


def take_snapshot(*targets: Target) -> RequestSnapshot:
    """One read of every configuration in ``targets``, all of one moment.

    A group is read on one side of any atomic reload (:meth:`ConfigGroup.views`). Across
    separate targets the generations are compared before and after; the read is retried a
    few times if one moved (past that the last read is served: each member is still whole,
    only their moment may differ by one reload).
    """
    return _take(targets, {config.key: config for config in members(targets)})


def _take(
    targets: tuple[Target, ...], configs: Mapping[str, DynamicConfig[Any]]
) -> RequestSnapshot:
    if len(targets) == 1:
        (target,) = targets
        if not isinstance(target, ConfigGroup):  # one configuration: one atomic read
            view = target.view()
            if view is not None:
                return RequestSnapshot({target.key: view[0]}, {target.key: view[1]}, configs)
    for _ in range(_ATTEMPTS if len(targets) > 1 else 1):
        before = [config.generation for config in configs.values()]
        views = _views(targets)
        if [config.generation for config in configs.values()] == before:
            break
    models = {key: None if view is None else view[0] for key, view in views.items()}
    generations = {key: 0 if view is None else view[1] for key, view in views.items()}
    return RequestSnapshot(models, generations, configs)


def enter(snapshot: RequestSnapshot) -> Token[RequestSnapshot | None]:
    """Open a scope holding ``snapshot`` (for frameworks that give a before/after pair)."""
    return _SNAPSHOT.set(snapshot)


def leave(token: Token[RequestSnapshot | None]) -> None:
    """Close the scope ``token`` opened; safe in a ``finally``."""
    _SNAPSHOT.reset(token)


@contextlib.contextmanager
def scoped(*targets: Target) -> Iterator[RequestSnapshot]:
    """A request (or task) scope over one fresh snapshot of ``targets``."""
    snapshot = take_snapshot(*targets)
    token = enter(snapshot)
    try:
        yield snapshot
    finally:
        leave(token)


def request_snapshot() -> RequestSnapshot:
    """The snapshot the current request began with; raises outside a request."""
    snapshot = _SNAPSHOT.get()
    if snapshot is None:
        raise OutsideRequestError(
            "no request scope is open here: inside a request the integration opens one "
            "(its middleware, extension or task hook); outside one (startup, a command, "
            "a background loop) read config.current(), which is the live value"
        )
    return snapshot


def current(config: DynamicConfig[M]) -> M:
    """``config``'s model as this request began: the same object for the whole request."""
    return request_snapshot().of(config)


# ---------------------------------------------------------------------- lifecycle
@dataclass(frozen=True)
class _Options:
    watch: bool
    debounce: float
    poll_interval: float | None
    remote_interval: float


class _Lease:
    """One target's follow, shared by every lifecycle that starts it."""

    def __init__(self) -> None:
        self.holders = 0
        self.pid: int | None = None
        self.stack: contextlib.ExitStack | None = None

    def arm(self, target: Target, options: _Options) -> None:
        if any(config.try_current() is None for config in members((target,))):
            target.init()
        stack = contextlib.ExitStack()
        if options.watch:
            if isinstance(target, ConfigGroup):
                follow: contextlib.AbstractContextManager[Any] = target.watching(
                    options.debounce, options.poll_interval, atomic=True
                )
            else:
                follow = target.following(
                    True, options.debounce, options.poll_interval, options.remote_interval
                )
            stack.enter_context(follow)
        self.stack, self.pid = stack, os.getpid()

    def disarm(self) -> None:
        stack, self.stack = self.stack, None
        if stack is not None and self.pid == os.getpid():
            stack.close()


_LEASES: weakref.WeakKeyDictionary[Target, _Lease] = weakref.WeakKeyDictionary()
_LOCK = [threading.Lock()]


def _reset_lock_in_child() -> None:
    _LOCK[0] = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_reset_lock_in_child)


class Lifecycle:
    """Init, follow and stop for the configurations an application reads.

    ``start()`` loads what is not loaded yet (a failed first load raises, so the app does
    not start on nothing) and follows every input; ``stop()`` stops following. Each target
    is leased: a second lifecycle over the same configuration shares its watcher, and the
    last ``stop()`` stops it. A group is watched with ``atomic=True`` (any member's change
    reloads the whole group all-or-none). ``watch=False`` only loads (a serverless handler).
    """

    def __init__(
        self,
        *targets: Target,
        watch: bool = True,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        remote_interval: float = 15.0,
    ) -> None:
        if not targets:
            raise ValueError("an integration needs at least one DynamicConfig or ConfigGroup")
        self.targets: tuple[Target, ...] = targets
        self.configs = members(targets)
        self._by_key = {config.key: config for config in self.configs}
        self._options = _Options(watch, debounce, poll_interval, remote_interval)
        self._started_in: int | None = None

    @property
    def started(self) -> bool:
        return self._started_in is not None

    def start(self) -> None:
        """Load and follow; idempotent in one process (a second call is a no-op)."""
        with _LOCK[0]:
            if self._started_in == os.getpid():
                return
            acquired: list[Target] = []
            try:
                for target in self.targets:
                    lease = _LEASES.setdefault(target, _Lease())
                    if lease.holders == 0 or lease.pid != os.getpid():
                        lease.arm(target, self._options)
                    lease.holders += 1
                    acquired.append(target)
            except BaseException:
                self._release(acquired)
                raise
            self._started_in = os.getpid()

    def ensure(self) -> None:
        """Re-arm after a fork: cheap when nothing forked (one ``getpid``)."""
        started = self._started_in
        if started is not None and started != os.getpid():
            with _LOCK[0]:
                for target in self.targets:
                    lease = _LEASES.setdefault(target, _Lease())
                    if lease.pid != os.getpid():
                        lease.holders = 0  # the parent's holders live in the parent
                        lease.stack = None
                self._started_in = None
            self.start()

    def stop(self) -> None:
        """Stop following (the last holder of a lease stops its watcher); idempotent."""
        with _LOCK[0]:
            if self._started_in != os.getpid():
                self._started_in = None
                return
            self._release(self.targets)
            self._started_in = None

    @staticmethod
    def _release(targets: Iterable[Target]) -> None:
        for target in targets:
            lease = _LEASES.get(target)
            if lease is None or lease.holders == 0:
                continue
            lease.holders -= 1
            if lease.holders == 0:
                lease.disarm()

    async def start_async(self) -> None:
        """:meth:`start` off the event loop (loading and registering watches block)."""
        await run_blocking(self.start, executor=self._executor())

    async def stop_async(self) -> None:
        """:meth:`stop` off the event loop (joining a watcher thread blocks)."""
        await run_blocking(self.stop, executor=self._executor())

    def _executor(self) -> Any:
        return getattr(self.targets[0], "executor", None)

    def snapshot(self) -> RequestSnapshot:
        """What a request begins with: re-arm after a fork, then one consistent read."""
        self.ensure()
        return _take(self.targets, self._by_key)

    def config(self, key: str | None = None) -> DynamicConfig[Any]:
        """The configuration named ``key``, or the only one."""
        if key is None:
            if len(self.configs) == 1:
                return self.configs[0]
            keys = ", ".join(config.key for config in self.configs)
            raise LookupError(f"several configurations ({keys}); name one by key")
        for config in self.configs:
            if config.key == key:
                return config
        raise LookupError(f"no configuration named {key!r} in this integration")

    def __enter__(self) -> Lifecycle:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Lifecycle:
        await self.start_async()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop_async()


class FollowOptions(TypedDict, total=False):
    """How a :class:`Lifecycle` follows its targets; an absent keyword is its default."""

    watch: bool
    debounce: float
    poll_interval: float | None
    remote_interval: float


class RouteOptions(TypedDict, total=False):
    """Which routes :func:`routes` mounts, and where; an absent keyword is its default."""

    prefix: str
    metrics: bool
    stale_after: float | None
    guard: Guard | None


class Options(FollowOptions, RouteOptions, total=False):
    """The keywords every web adapter takes after its targets: how to follow (a
    :class:`Lifecycle`'s), which routes to mount (``mount_routes=False``: none). Written
    once here, so an option added is an option of every adapter."""

    mount_routes: bool


def lifecycle_of(
    target: Target | Lifecycle, *more: Target, **follow: Unpack[FollowOptions]
) -> Lifecycle:
    """What every adapter's ``setup`` takes: configurations, groups, or a built lifecycle."""
    if isinstance(target, Lifecycle):
        if more:
            raise TypeError("pass either a Lifecycle or configurations, not both")
        return target
    return Lifecycle(target, *more, **follow)


def wire(
    target: Target | Lifecycle, more: tuple[Target, ...], options: Options
) -> tuple[Lifecycle, dict[str, Any] | None]:
    """An adapter's lifecycle, and the keywords of its :func:`routes` (``None``: mount no
    routes). A keyword no adapter takes is a TypeError naming it and the known ones."""
    known = Options.__optional_keys__
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r}; the options are "
            + ", ".join(sorted(known))
        )
    follow = {
        key: value for key, value in options.items() if key in FollowOptions.__optional_keys__
    }
    lifecycle = lifecycle_of(target, *more, **cast(FollowOptions, follow))
    if not options.get("mount_routes", True):
        return lifecycle, None
    mounted = {
        key: value for key, value in options.items() if key in RouteOptions.__optional_keys__
    }
    return lifecycle, mounted


# ---------------------------------------------------------------------- health
@dataclass(frozen=True)
class Reply:
    """A rendered answer: what is left once the framework is gone."""

    status: int
    body: str
    content_type: str = JSON

    @classmethod
    def json(cls, status: int, body: Any) -> Reply:
        return cls(status, json.dumps(body, sort_keys=True), JSON)


def liveness() -> Reply:
    """Always 200: a configuration that will not reload is a reason to stop routing to a
    process, never to restart it into the same broken file."""
    return Reply.json(200, {"status": "ok"})


def _entry(config: DynamicConfig[Any], stale_after: float | None) -> tuple[dict[str, Any], str]:
    status = config.status()
    installed = config.try_current() is not None
    age = status.stale_for
    entry: dict[str, Any] = {
        "installed": installed,
        "generation": status.generation,
        "last_reason": status.last_reason,
        "snapshot_age_seconds": None if age is None else round(age, 3),
        "consecutive_failures": status.consecutive_failures,
        "refusals": status.refusals,
        "last_failure": None
        if status.last_failure is None
        else {"kind": status.last_failure.kind, "path": status.last_failure.path},
        "watching": config.watching_now,
    }
    remote = config.remote_status()
    if remote is not None:
        entry["remote"] = {
            "reachable": remote.reachable,
            "fetches": remote.fetches,
            "consecutive_failures": remote.consecutive_failures,
        }
    problem = ""
    if not installed:
        problem = "nothing installed"
    elif not status.is_healthy:
        problem = f"{status.consecutive_failures} reloads refused in a row"
    elif stale_after is not None and age is not None and age > stale_after:
        problem = f"no install for {age:.0f}s"
    entry["ready"] = not problem
    return entry, problem


def readiness(*targets: Target, stale_after: float | None = None) -> Reply:
    """200 when every configuration is installed and its last reload worked, else 503.

    The body names each configuration's generation and reload health (counts, reasons,
    error kinds and paths; never a value): ``ok``, ``degraded`` (serving, but reloads are
    refused or, with ``stale_after``, nothing installed for that long) or ``unavailable``
    (a configuration never installed).
    """
    configs: dict[str, Any] = {}
    problems: list[str] = []
    missing = False
    for config in members(targets):
        entry, problem = _entry(config, stale_after)
        configs[config.key] = entry
        if problem:
            problems.append(f"{config.key}: {problem}")
            missing = missing or not entry["installed"]
    body: dict[str, Any] = {
        "status": "ok" if not problems else ("unavailable" if missing else "degraded"),
        "generations": {key: entry["generation"] for key, entry in configs.items()},
        "configs": configs,
    }
    if problems:
        body["problems"] = problems
    return Reply.json(503 if problems else 200, body)


# ---------------------------------------------------------------------- routes
def token_guard(token: str | Callable[[], str], header: str = "authorization") -> Guard:
    """A guard accepting ``<header>: Bearer <token>`` (``token`` may be a callable, read on
    every request, so a rotated secret needs no restart); compared in constant time."""

    def guard(headers: Mapping[str, str]) -> bool:
        expected = token() if callable(token) else token
        given = headers.get(header.lower(), "")
        scheme, _, value = given.partition(" ")
        return (
            bool(expected)
            and scheme.lower() == "bearer"
            and hmac.compare_digest(value.encode(), expected.encode())
        )

    return guard


Handler = Callable[[str, Mapping[str, str], Mapping[str, str]], Reply]
"""A route's body: the ``{path}`` tail (or ``""``), the headers (names lower-cased) and the
query string."""


@dataclass(frozen=True)
class Route:
    """One path an adapter mounts (``{path}`` marks a tail that may hold slashes)."""

    path: str
    name: str
    handle: Handler
    blocking: bool = False
    """Re-reads the sources (the diagnostics): an async adapter runs it off the loop."""


def _metrics_body(lifecycle: Lifecycle) -> Callable[[], Reply] | None:
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    except ImportError:
        return None
    from dynconf.metrics import ConfigCollector

    registry = CollectorRegistry(auto_describe=False)
    collector = ConfigCollector()
    for config in lifecycle.configs:
        collector.add(config.key, config)
    registry.register(collector)

    def body() -> Reply:
        return Reply(200, generate_latest(registry).decode(), CONTENT_TYPE_LATEST)

    return body


def routes(
    lifecycle: Lifecycle,
    *,
    prefix: str = "",
    metrics: bool = True,
    stale_after: float | None = None,
    guard: Guard | None = None,
    diagnostics_prefix: str = "/_config",
) -> tuple[Route, ...]:
    """``/healthz``, ``/readyz``, ``/metrics`` (with ``prometheus-client``) and, only when a
    ``guard`` is given, ``/_config/check`` and ``/_config/explain/{path}`` (``?config=key``
    when there are several). Unguarded, the diagnostics are not mounted at all; a guarded
    route answers 404 to a request the guard refuses, like an absent one."""

    def guarded(handle: Callable[[str, Mapping[str, str]], Reply]) -> Handler:
        def checked(path: str, headers: Mapping[str, str], query: Mapping[str, str]) -> Reply:
            if guard is None or not guard(headers):
                return Reply.json(404, {"detail": "not found"})
            return handle(path, query)

        return checked

    def check(_path: str, _query: Mapping[str, str]) -> Reply:
        reports = [config.check() for config in lifecycle.configs]
        failed = any(report.failure is not None for report in reports)
        return Reply(422 if failed else 200, "\n".join(map(str, reports)), TEXT)

    def explain(path: str, query: Mapping[str, str]) -> Reply:
        try:
            config = lifecycle.config(query.get("config"))
            return Reply(200, str(config.explain(path)), TEXT)
        except (LookupError, NotInitialisedError, DynconfError) as error:
            return Reply.json(400, {"detail": str(error)})

    table = [
        Route(f"{prefix}/healthz", "healthz", lambda _p, _h, _q: liveness()),
        Route(
            f"{prefix}/readyz",
            "readyz",
            lambda _p, _h, _q: readiness(*lifecycle.targets, stale_after=stale_after),
        ),
    ]
    body = _metrics_body(lifecycle) if metrics else None
    if body is not None:
        table.append(Route(f"{prefix}/metrics", "metrics", lambda _p, _h, _q: body()))
    if guard is not None:
        base = f"{prefix}{diagnostics_prefix}"
        table.append(Route(f"{base}/check", "config-check", guarded(check), blocking=True))
        table.append(
            Route(f"{base}/explain/{{path}}", "config-explain", guarded(explain), blocking=True)
        )
    return tuple(table)


# ---------------------------------------------------------------------- adapters
def _arguments(
    path: str, headers: Iterable[tuple[str, str]], query: Mapping[str, str]
) -> tuple[str, dict[str, str], dict[str, str]]:
    return path, {name.lower(): value for name, value in headers}, dict(query)


def reply_to(
    route: Route, path: str, headers: Iterable[tuple[str, str]], query: Mapping[str, str]
) -> Reply:
    """``route``'s reply to a request, for a blocking adapter (header names lower-cased,
    as a :data:`Guard` reads them)."""
    return route.handle(*_arguments(path, headers, query))


async def reply_to_async(
    route: Route, path: str, headers: Iterable[tuple[str, str]], query: Mapping[str, str]
) -> Reply:
    """:func:`reply_to` for an async adapter: a route that re-reads the sources (the
    diagnostics) runs off the loop."""
    arguments = _arguments(path, headers, query)
    if route.blocking:
        return await anyio.to_thread.run_sync(route.handle, *arguments)
    return route.handle(*arguments)


class _Blueprint(Protocol):
    def add_url_rule(self, rule: str, *, view_func: Callable[..., Any]) -> Any: ...


B = TypeVar("B", bound=_Blueprint)
App = TypeVar("App")


class BlueprintFactory(Generic[B]):
    """The ``blueprint()`` of the Flask and Quart adapters: every route as ``view(route)``."""

    def __init__(
        self,
        blueprint_type: Callable[[str, str], B],
        import_name: str,
        view: Callable[[Route], Any],
    ) -> None:
        self._type = blueprint_type
        self._import_name = import_name
        self._view = view

    def __call__(
        self,
        lifecycle: Lifecycle,
        *,
        name: str = "dynconf",
        prefix: str = "",
        metrics: bool = True,
        stale_after: float | None = None,
        guard: Guard | None = None,
    ) -> B:
        """The health, metrics and (guarded) diagnostics views, as a blueprint."""
        mounted = self._type(name, self._import_name)
        table = routes(
            lifecycle, prefix=prefix, metrics=metrics, stale_after=stale_after, guard=guard
        )
        for route in table:
            handler = self._view(route)
            handler.__name__ = route.name.replace("-", "_")
            mounted.add_url_rule(route.path.replace("{path}", "<path:path>"), view_func=handler)
        return mounted


class BlueprintExtension(Generic[App]):
    """Flask's and Quart's extension: a lifecycle, the request snapshot on ``g``, a blueprint.

    ``Dynconf(config, app=app)`` or ``Dynconf(config)`` then ``init_app(app)``; the adapter
    writes ``init_app`` (when its app starts the lifecycle) with :meth:`_register`.
    """

    def __init__(
        self,
        target: Target | Lifecycle,
        *more: Target,
        app: App | None = None,
        **options: Unpack[Options],
    ) -> None:
        self.lifecycle, self._route_options = wire(target, more, options)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: App) -> None:
        raise NotImplementedError

    def _register(
        self,
        app: Any,
        blueprint: BlueprintFactory[Any],
        open_request: Callable[[], Any],
        close_request: Callable[[BaseException | None], Any],
    ) -> None:
        """Hook ``app``'s requests (open and close the snapshot) and mount the blueprint."""
        app.extensions[EXTENSION] = self
        app.before_request(open_request)
        app.teardown_request(close_request)
        if self._route_options is not None:
            app.register_blueprint(blueprint(self.lifecycle, **self._route_options))

    def _open_on(self, namespace: Any) -> None:
        """Take this request's snapshot onto ``g`` and make it the current one."""
        taken = self.lifecycle.snapshot()
        namespace.dynconf = taken
        namespace._dynconf_token = enter(taken)

    @staticmethod
    def _close_on(namespace: Any) -> None:
        token = namespace.pop("_dynconf_token", None)
        if token is not None:
            leave(token)


EXTENSION = "dynconf"
"""The key of the extension in ``app.extensions``."""
