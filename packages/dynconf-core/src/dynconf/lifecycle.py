"""The lifecycle of one configuration: resolve → validate → install, generations, hooks.

``current()`` reads the installed model (no resolve, no validation, no lock): each install
swaps one instance attribute, which ``current()`` returns and ``live`` is.

A refused reload installs nothing: the previous snapshot keeps serving (last-known-good),
the generation does not move, and the refusal is recorded as (kind, path) — never a value.
A success always installs, even with identical content, and the generation goes up by one.

:class:`ConfigLifecycle` is the base of :class:`dynconf.config.DynamicConfig`, which adds the
builder (validated setters over :class:`~dynconf.resolve.LoadSpec`), the remote layer
(:mod:`dynconf.remote_layer`) and the file watch; ``ConfigGroup`` installs several
configurations at once through ``_prepare``, ``_install`` and ``_announce``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import typing
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final, Generic, TypeVar

import anyio

from dynconf.cache import CacheMode, LastKnownGood
from dynconf.concurrency import run_blocking
from dynconf.diagnostics import changed_paths
from dynconf.document import Document
from dynconf.errors import DynconfError, NotInitialisedError
from dynconf.models import ModelAdapter
from dynconf.notify import (
    DEFAULT_BUFFER,
    AsyncHook,
    Backpressure,
    Broadcast,
    ConfigEvent,
    Reloaded,
    ReloadFailed,
    Stream,
)
from dynconf.resolve import LoadSpec, Resolved, resolve

__all__ = [
    "ConfigStatus",
    "Failure",
    "HookGuard",
    "ConfigLifecycle",
    "ReloadReason",
]

M = TypeVar("M")
T = TypeVar("T")
Hook: typing.TypeAlias = Callable[[M | None, M], None]
"""A reload hook: ``hook(old, new)``, ``old`` is ``None`` on the first install."""
AsyncHookFn: typing.TypeAlias = Callable[[M | None, M], Awaitable[None]]
"""A coroutine reload hook, run on the loop it was registered from."""
_USAGE: Final = object()
log = logging.getLogger("dynconf.engine")

_NOT_CACHED: Final = frozenset({"recovered", "replaced"})


class ReloadReason(StrEnum):
    """Why a snapshot was installed (these strings are log and metric values)."""

    INITIAL = "initial"
    FILE_CHANGED = "file-changed"
    REMOTE_CHANGED = "remote-changed"
    MANUAL = "manual"
    RECOVERED = "recovered"
    REPLACED = "replaced"


@dataclass(frozen=True, slots=True)
class Failure:
    """The last refusal: its kind and document path, never its message or a value."""

    kind: str
    path: str
    at: float


@dataclass(frozen=True, slots=True)
class ConfigStatus:
    """A value-free summary for health endpoints and dashboards."""

    generation: int
    loaded_at: float | None
    last_reason: str | None
    last_failure: Failure | None
    consecutive_failures: int
    refusals: int

    @property
    def is_healthy(self) -> bool:
        return self.consecutive_failures == 0

    @property
    def stale_for(self) -> float | None:
        return None if self.loaded_at is None else time.monotonic() - self.loaded_at


def _change_arguments(name: str, args: tuple[Any, ...]) -> tuple[list[str], Any]:
    """Split ``on_change``-style arguments into the paths and the hook (``None``: decorator
    form); anything that is not a path is a TypeError saying how to call it."""
    *paths, last = args if args else (_USAGE,)
    hook = None
    if callable(last) and paths:
        hook = last
    else:
        paths.append(last)
    for position, path in enumerate(paths, 1):
        if not isinstance(path, str) or not path:
            given = "nothing" if path is _USAGE else f"a {type(path).__name__}"
            raise TypeError(
                f"{name} takes one or more dotted paths, then optionally the hook: "
                f'config.{name}("db", hook) or @config.{name}("db"); argument '
                f"{position} is {given}, not a path"
            )
    return paths, hook


class HookGuard:
    """Returned by hook registration: call it, ``close()`` it or leave its ``with`` block
    to unregister the hook."""

    def __init__(self, remove: Callable[[], None]) -> None:
        self._remove = remove

    def close(self) -> None:
        self._remove()
        self._remove = lambda: None

    __call__ = close

    def __enter__(self) -> HookGuard:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclass
class _Snapshot(Generic[M]):
    model: M
    resolved: Resolved
    generation: int
    loaded_at: float
    reason: ReloadReason
    fingerprint: str = field(default="")


class ConfigLifecycle(Generic[M]):
    """Resolve, validate and install one section; the generation, status and hooks.

    What to load is the subclass's :meth:`_spec_for_load`; everything else — the snapshot,
    the refusal streak, the cache, the hooks, the streams and the waiters — lives here.
    """

    live: M
    """The installed model as a plain instance attribute (``config.live.db.port``): the
    cheapest live read, one attribute load, since no call is made. Before the first install
    it is a placeholder whose every attribute raises :class:`NotInitialisedError`."""

    def __init__(self, adapter: ModelAdapter[M], key: str, executor: Executor | None) -> None:
        self.executor = executor
        self._adapter = adapter
        self._key = key
        self._lock = threading.RLock()
        self._cond = threading.Condition(threading.Lock())
        self._snapshot: _Snapshot[M] | None = None
        self._generation = 0
        self._consecutive_failures = 0
        self._refusals = 0
        self._last_failure: Failure | None = None
        self._last_error: DynconfError | None = None
        self._hooks: list[Callable[[M | None, M], None]] = []
        self._failure_hooks: list[Callable[[DynconfError], None]] = []
        self._loaded_once = False
        self._cache: LastKnownGood | None = None
        self._models: Broadcast[M] = Broadcast()
        self._events: Broadcast[ConfigEvent] = Broadcast()
        self._installed: M | None = None
        self.live = typing.cast(M, _Unloaded(key))

    def _spec_for_load(self) -> LoadSpec:
        """What the next load reads (the subclass's sources and runtime layers)."""
        raise NotImplementedError

    @property
    def key(self) -> str:
        return self._key

    @property
    def model(self) -> type[M] | None:
        return self._adapter.model

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def last_error(self) -> DynconfError | None:
        """Why the last reload was refused (``None`` after a success)."""
        return self._last_error

    async def _blocking(self, function: Callable[..., T], *args: Any) -> T:
        return await run_blocking(function, *args, executor=self.executor)

    def _after_fork_in_child(self) -> None:
        """Only the forking thread survives a fork: locks another thread held stay held
        and watcher threads are gone. The child keeps its snapshot and starts afresh."""
        self._lock = threading.RLock()
        self._cond = threading.Condition(threading.Lock())
        self._models = Broadcast()
        self._events = Broadcast()

    def _not_initialised(self) -> M:
        raise NotInitialisedError(
            f"the configuration `{self.key}` has not been loaded; call init() first"
        )

    def current(self) -> M:
        """The installed model: one attribute load and a check, no lock, no resolve.

        A plain method, measured faster than the C callable it replaced (an instance
        attribute holding ``itertools.repeat(model).__next__``): Python inlines the call of
        a Python method, and a method-wrapper call is not vectorised (bench/bench_load.py).
        """
        model = self._installed
        if model is None:
            return self._not_initialised()
        return model

    def try_current(self) -> M | None:
        snapshot = self._snapshot
        return None if snapshot is None else snapshot.model

    def view(self) -> tuple[M, int] | None:
        """The installed model and its generation, taken from one snapshot (``None`` before
        the first install): ``(current(), generation)`` as two reads could straddle a reload."""
        snapshot = self._snapshot
        return None if snapshot is None else (snapshot.model, snapshot.generation)

    def _resolve_and_validate(self) -> tuple[Resolved, M]:
        resolved = resolve(self._spec_for_load())
        model = self._adapter.validate(resolved.section, key=self.key)
        return resolved, model

    def load(self) -> M:
        """Resolve and validate without installing anything."""
        self._loaded_once = True
        return self._resolve_and_validate()[1]

    def reload(self, reason: ReloadReason = ReloadReason.MANUAL) -> M:
        """Resolve, validate and install; a refusal keeps the previous snapshot and raises."""
        return self._reload(reason)

    def try_reload(self, reason: ReloadReason = ReloadReason.MANUAL) -> bool:
        """Like :meth:`reload` but reports a refusal through status instead of raising."""
        try:
            self._reload(reason)
        except DynconfError:
            return False
        return True

    def _reload(self, reason: ReloadReason) -> M:
        with self._lock:
            self._loaded_once = True
            started = time.perf_counter()
            resolved, model = self._prepare()
            old, snapshot = self._install(resolved, model, reason, started)
        self._announce(old, snapshot)
        return model

    def _prepare(self) -> tuple[Resolved, M]:
        """Resolve and validate; a refusal is recorded (status, events) and raised."""
        try:
            return self._resolve_and_validate()
        except DynconfError as error:
            self._refuse(error)
            raise

    def _install(
        self, resolved: Resolved, model: M, reason: ReloadReason, started: float
    ) -> tuple[_Snapshot[M] | None, _Snapshot[M]]:
        """Publish a validated model (the caller holds the lock); nothing here can fail."""
        old = self._snapshot
        self._generation += 1
        snapshot = _Snapshot(
            model=model,
            resolved=resolved,
            generation=self._generation,
            loaded_at=time.monotonic(),
            reason=reason,
        )
        self._snapshot = snapshot
        self._installed = model
        self.live = model
        if reason is not ReloadReason.RECOVERED:
            # a recovered start keeps its refusal streak: it serves an old document
            self._consecutive_failures = 0
            self._last_error = None
        if self._cache is not None and reason not in _NOT_CACHED:
            self._keep_in_cache(old, resolved.section)
        log.debug(
            "config_reload",
            extra={
                "config": self.key,
                "reason": reason.value,
                "generation": self._generation,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                "outcome": "installed",
            },
        )
        return old, snapshot

    def _announce(self, old: _Snapshot[M] | None, snapshot: _Snapshot[M]) -> None:
        """Wake waiters and streams first, then run the hooks, outside the lock."""
        with self._cond:
            self._cond.notify_all()
        if self._models:
            self._models.publish(snapshot.model)
        if self._events:
            moved = (
                ()
                if old is None
                else tuple(
                    c.path for c in changed_paths(old.resolved.section, snapshot.resolved.section)
                )
            )
            self._events.publish(
                Reloaded(
                    generation=snapshot.generation, reason=snapshot.reason.value, changed=moved
                )
            )
        self._run_hooks(old, snapshot)

    def _keep_in_cache(self, old: _Snapshot[M] | None, section: Document) -> None:
        cache = self._cache
        assert cache is not None
        if old is None and cache.mode is CacheMode.FINGERPRINT:
            drift = cache.drift(section)
            if drift is not None:
                log.info("config_cache_drift", extra={"config": self.key, "drift": drift})
        cache.write(section)

    def _recover(self, error: DynconfError) -> M:
        """A cold start failed: start from the cache, or raise ``error`` unchanged."""
        cache = self._cache
        if cache is None or self._snapshot is not None:
            raise error
        cached = cache.recoverable()
        if cached is None:
            log.warning(
                "config_cache_not_recovered",
                extra={"config": self.key, "cache": str(cache.path), "mode": cache.mode.value},
            )
            raise error
        # the cache replaces what could not load (files, discovery, defaults, remote,
        # secrets dir); the environment layers, flags and overrides still sit above it
        spec = replace(
            self._spec_for_load(),
            files=[],
            discover=[],
            defaults={},
            secrets_dir=None,
            remote=None,
            cached=cached,
        )
        with self._lock:
            started = time.perf_counter()
            try:
                resolved = resolve(spec)
                model = self._adapter.validate(resolved.section, key=self.key)
            except DynconfError as second:
                error.add_note(
                    f"the cached configuration {cache.path} did not load either "
                    f"({second.kind.value} at `{second.path}`)"
                )
                raise error from None
            old, snapshot = self._install(resolved, model, ReloadReason.RECOVERED, started)
        log.warning(
            "config_recovered_from_cache",
            extra={
                "config": self.key,
                "cache": str(cache.path),
                "kind": error.kind.value,
                "path": error.path,
            },
        )
        self._announce(old, snapshot)
        return model

    def _refuse(self, error: DynconfError) -> None:
        self._consecutive_failures += 1
        self._refusals += 1
        self._last_failure = Failure(error.kind.value, error.path, time.monotonic())
        self._last_error = error
        log.warning(
            "config_reload_refused",
            extra={"config": self.key, "kind": error.kind.value, "path": error.path},
        )
        with self._cond:
            self._cond.notify_all()
        if self._events:
            self._events.publish(
                ReloadFailed(
                    generation=self._generation,
                    kind=error.kind.value,
                    path=error.path,
                    consecutive=self._consecutive_failures,
                )
            )
        for hook in list(self._failure_hooks):
            try:
                hook(error)
            except Exception:
                log.exception("config_hook_failed", extra={"config": self.key})

    def _run_hooks(self, old: _Snapshot[M] | None, new: _Snapshot[M]) -> None:
        for hook in list(self._hooks):
            try:
                hook(None if old is None else old.model, new.model)
            except Exception:
                log.exception("config_hook_failed", extra={"config": self.key})

    def _recover_or_refuse(self, error: DynconfError) -> M:
        self._refuse(error)
        return self._recover(error)

    async def reload_async(self, reason: ReloadReason = ReloadReason.MANUAL) -> M:
        return await self._blocking(self.reload, reason)

    async def load_async(self) -> M:
        return await self._blocking(self.load)

    # ------------------------------------------------------------------ diagnostics
    def _resolved(self) -> Resolved:
        if self._snapshot is None:
            self._not_initialised()
        assert self._snapshot is not None
        return self._snapshot.resolved

    def status(self) -> ConfigStatus:
        snapshot = self._snapshot
        return ConfigStatus(
            generation=self._generation,
            loaded_at=None if snapshot is None else snapshot.loaded_at,
            last_reason=None if snapshot is None else snapshot.reason.value,
            last_failure=self._last_failure,
            consecutive_failures=self._consecutive_failures,
            refusals=self._refusals,
        )

    def on_reload(self, hook: Callable[[M | None, M], None]) -> HookGuard:
        """Call ``hook(old, new)`` after every install; the first install has ``old=None``."""
        self._hooks.append(hook)
        return HookGuard(lambda: self._hooks.remove(hook) if hook in self._hooks else None)

    @typing.overload
    def on_change(self, path: str, /, *paths: str) -> Callable[[Hook[M]], HookGuard]: ...

    @typing.overload
    def on_change(self, path: str, hook: Hook[M], /) -> HookGuard: ...

    @typing.overload
    def on_change(self, path: str, /, *rest: str | Hook[M]) -> Any: ...

    def on_change(self, *args: Any) -> Any:
        """:meth:`on_reload` for a hook that fires only when one of the named paths moved.

        Two forms, both taking one or more dotted paths: ``config.on_change("db", hook)``
        registers ``hook(old, new)`` at once and returns its :class:`HookGuard`;
        ``@config.on_change("db", "cache")`` decorates the hook. Anything else — a hook
        with no path, a path that is not a string — is a :class:`TypeError` saying so,
        never a hook silently registered under a path nobody writes.
        """
        paths, hook = _change_arguments("on_change", args)

        def register(hook: Hook[M]) -> HookGuard:
            return self.on_reload(self._filtered(paths, hook))

        return register if hook is None else register(hook)

    def _filtered(self, paths: list[str], hook: Hook[M]) -> Hook[M]:
        """``hook`` behind a filter that passes only installs where one of ``paths`` moved
        (the first install always passes: everything was added)."""
        state: dict[str, Document | None] = {"section": None}

        def filtered(old: M | None, new: M) -> None:
            section = self._resolved().section
            moved = {c.path for c in changed_paths(state["section"], section)}
            state["section"] = section
            if any(m == p or m.startswith(f"{p}.") for m in moved for p in paths):
                hook(old, new)

        return filtered

    # ------------------------------------------------------------------ asyncio
    def on_reload_async(
        self,
        hook: AsyncHookFn[M] | None = None,
        /,
        *,
        backpressure: Backpressure | str = Backpressure.LATEST,
    ) -> Any:
        """Run the coroutine ``hook(old, new)`` as a task on the calling loop after every
        install; register it from that loop. Usable as a decorator.

        The installing thread only schedules it (``call_soon_threadsafe``) and never waits;
        ``backpressure`` says what happens when installs outrun the hook (``latest`` by
        default: while a call runs, only the newest install waits to run next).
        """
        policy = Backpressure(backpressure)

        def register(hook: AsyncHookFn[M]) -> HookGuard:
            return self.on_reload(AsyncHook(hook, policy, what="on_reload_async"))

        return register if hook is None else register(hook)

    @typing.overload
    def on_change_async(
        self, path: str, /, *paths: str, backpressure: Backpressure | str = ...
    ) -> Callable[[AsyncHookFn[M]], HookGuard]: ...

    @typing.overload
    def on_change_async(
        self, path: str, hook: AsyncHookFn[M], /, *, backpressure: Backpressure | str = ...
    ) -> HookGuard: ...

    @typing.overload
    def on_change_async(
        self, path: str, /, *rest: str | AsyncHookFn[M], backpressure: Backpressure | str = ...
    ) -> Any: ...

    def on_change_async(
        self, *args: Any, backpressure: Backpressure | str = Backpressure.LATEST
    ) -> Any:
        """:meth:`on_change` for a coroutine hook, dispatched like :meth:`on_reload_async`:
        ``config.on_change_async("db", hook)`` or ``@config.on_change_async("db")``."""
        paths, hook = _change_arguments("on_change_async", args)
        policy = Backpressure(backpressure)

        def register(hook: AsyncHookFn[M]) -> HookGuard:
            dispatch = AsyncHook(hook, policy, what="on_change_async")
            return self.on_reload(self._filtered(paths, dispatch))

        return register if hook is None else register(hook)

    def changes(self, buffer: int = DEFAULT_BUFFER) -> Stream[M]:
        """An async iterator of every model installed from now on, in order.

        It never slows a reload: installs are handed to the loop and buffered; when more
        than ``buffer`` wait undelivered, the oldest waiting are dropped, so the newest is
        always delivered (``buffer=1`` is pure newest-wins). Call it from the loop that
        iterates; the subscription starts at the call.
        """
        return self._models.stream("changes()", buffer)

    def events(self, buffer: int = DEFAULT_BUFFER) -> Stream[ConfigEvent]:
        """An async iterator of :class:`~dynconf.notify.Reloaded` and
        :class:`~dynconf.notify.ReloadFailed` events, with :meth:`changes`' buffering.

        Events carry generations, reasons, kinds, paths and counts, never a value.
        """
        return self._events.stream("events()", buffer)

    def on_reload_failed(self, hook: Callable[[DynconfError], None]) -> HookGuard:
        self._failure_hooks.append(hook)
        return HookGuard(
            lambda: self._failure_hooks.remove(hook) if hook in self._failure_hooks else None
        )

    def changed(self, timeout: float | None = None) -> M | None:
        """Wait for the next install (returns the model) or refusal (returns ``None``)."""
        start_generation, start_refusals = self._generation, self._refusals
        with self._cond:
            self._cond.wait_for(
                lambda: self._generation != start_generation or self._refusals != start_refusals,
                timeout=timeout,
            )
        if self._generation != start_generation and self._snapshot is not None:
            return self._snapshot.model
        return None

    async def changed_async(self, timeout: float | None = None) -> M | None:
        """The next install (its model) or refusal (``None``), awaited on the loop; ``None``
        also when ``timeout`` passes first. Nothing polls and no thread is parked."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # another async library (trio): wait on a worker thread
            return await anyio.to_thread.run_sync(self.changed, timeout, abandon_on_cancel=True)
        stream = self.events(buffer=1)
        try:
            with anyio.move_on_after(timeout):
                event = await anext(stream)
                if isinstance(event, Reloaded):
                    return self.try_current()
            return None
        finally:
            await stream.aclose()


class _Unloaded:
    """``DynamicConfig.live`` before the first install: any attribute read says why.

    A placeholder rather than a class-level descriptor, because a descriptor on the class
    would cost every later ``config.live`` read its attribute-load fast path.
    """

    __slots__ = ("_key",)

    def __init__(self, key: str) -> None:
        self._key = key

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and hasattr probes get the usual answer
            raise AttributeError(name)
        raise NotInitialisedError(
            f"the configuration `{self._key}` has not been loaded; call init() before "
            f"reading config.live.{name}"
        )

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<not loaded: {self._key!r}>"
