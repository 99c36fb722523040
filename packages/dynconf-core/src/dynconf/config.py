"""``DynamicConfig``: typed, live configuration in-process.

The lifecycle is resolve → validate → install. ``current()`` reads the installed model (no
resolve, no validation, no lock): each install swaps one instance attribute, which
``current()`` returns and ``live`` is.

A refused reload installs nothing: the previous snapshot keeps serving (last-known-good),
the generation does not move, and the refusal is recorded as (kind, path) — never a value.
A success always installs, even with identical content, and the generation goes up by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
import time
import typing
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

import anyio

from dynconf.cache import CacheMode, LastKnownGood
from dynconf.concurrency import run_blocking
from dynconf.diagnostics import (
    Change,
    FieldError,
    Report,
    ResolvedLeaf,
    Snapshot,
    changed_paths,
    unknown_keys,
)
from dynconf.document import Document, Value, fingerprint, has_path, leaf_paths
from dynconf.errors import (
    BackendError,
    DynconfError,
    InvalidError,
    MissingError,
    NotInitialisedError,
    Origin,
    RemoteError,
)
from dynconf.follow import Follower, FollowEvents, Slot, StoreDriver
from dynconf.layers import Contribution
from dynconf.models import ModelAdapter, Values, secret_paths
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
from dynconf.plugins import default_registry
from dynconf.resolve import LoadSpec, RemoteDocument, Resolved, resolve
from dynconf.stores import (
    Absent,
    AsyncRemoteSource,
    Fetched,
    RemoteSource,
    is_async_source,
)
from dynconf.text import type_text
from dynconf.watch import DEFAULT_DEBOUNCE, FileWatch

__all__ = [
    "Change",
    "ConfigStatus",
    "DynamicConfig",
    "Failure",
    "HookGuard",
    "ReloadReason",
    "RemoteStatus",
    "RemoteWatch",
    "changed_paths",
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


@dataclass(frozen=True, slots=True)
class RemoteStatus:
    """What the remote layer has seen: fetch counts, reachability, the failure streak."""

    fetches: int
    last_fetch: float | None
    last_fetch_duration: float | None
    consecutive_failures: int
    last_failure: Failure | None

    @property
    def reachable(self) -> bool | None:
        if self.last_fetch is None and self.last_failure is None:
            return None
        return self.consecutive_failures == 0


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
class _RemoteSlot:
    source: RemoteSource | AsyncRemoteSource
    description: str
    document: RemoteDocument | None = None
    generation: int = 0
    fetches: int = 0
    last_fetch: float | None = None
    last_fetch_duration: float | None = None
    consecutive_failures: int = 0
    last_failure: Failure | None = None


@dataclass
class _Snapshot(Generic[M]):
    model: M
    resolved: Resolved
    generation: int
    loaded_at: float
    reason: ReloadReason
    fingerprint: str = field(default="")


class DynamicConfig(Generic[M]):
    """A live, typed view of one configuration section.

    Build it with chained source methods, then ``init()``. Sources are fixed after the
    first load (except ``remote``, which may be set later); runtime layers (defaults,
    assignments, overrides) take effect on the next load.
    """

    live: M
    """The installed model as a plain instance attribute (``config.live.db.port``): the
    cheapest live read, one attribute load, since no call is made. Before the first install
    it is a placeholder whose every attribute raises :class:`NotInitialisedError`."""

    def __init__(
        self,
        model: type[M] | None = None,
        key: str = "",
        *,
        secrets: Collection[str] = (),
        executor: Executor | None = None,
    ) -> None:
        """``executor`` runs the blocking half of the ``_async`` calls (``None``: the
        process default of :func:`dynconf.concurrency.set_executor`, else anyio's pool)."""
        self.executor = executor
        self._adapter: ModelAdapter[M] = ModelAdapter(model)
        self._spec = LoadSpec(key=key)
        self._secrets = frozenset(secrets) | frozenset(secret_paths(model))
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
        self._remote: _RemoteSlot | None = None
        self._remote_generation = 0
        self._watch: FileWatch | None = None
        self._remote_watch: RemoteWatch | None = None
        self._loaded_once = False
        self._cache: LastKnownGood | None = None
        self._models: Broadcast[M] = Broadcast()
        self._events: Broadcast[ConfigEvent] = Broadcast()
        self._installed: M | None = None
        self.live = typing.cast(M, _Unloaded(key))
        _LIVE.add(self)

    @classmethod
    def from_spec_file(
        cls, path: str | Path, model: type[M] | None = None, *, secrets: Collection[str] = ()
    ) -> DynamicConfig[M]:
        """A configuration whose sources are a ``dynconf resolve`` spec file (see
        :mod:`dynconf.spec`), so the service and ``dynconf check --spec`` read one list."""
        from dynconf.spec import load_spec_file

        spec = load_spec_file(Path(path))
        config = cls(model, spec.key, secrets=secrets)
        config._spec = spec
        return config

    @property
    def last_known_good(self) -> LastKnownGood | None:
        """The :meth:`cache` file of this configuration, if it has one."""
        return self._cache

    @classmethod
    def from_settings(cls, settings_cls: type[Any], key: str = "") -> DynamicConfig[Any]:
        """A configuration whose layers are what a pydantic-settings class declares
        (files, ``.env``, secrets dir, prefixed and nested variable names); see
        :func:`dynconf.settings.from_settings`."""
        from dynconf.settings import from_settings

        return from_settings(settings_cls, key)

    # ------------------------------------------------------------------ sources
    def _source_change(self) -> None:
        if self._loaded_once:
            raise BackendError(
                "sources are fixed after the first load; build a new DynamicConfig to change them"
            )

    def file(self, path: str | Path) -> DynamicConfig[M]:
        self._source_change()
        self._spec.files.append(Path(path))
        return self

    def discover(self, name: str, directories: Collection[str | Path]) -> DynamicConfig[M]:
        self._source_change()
        self._spec.discover.append((name, [Path(d) for d in directories]))
        return self

    def env(self, prefix: str) -> DynamicConfig[M]:
        self._source_change()
        self._spec.env_prefix = prefix
        return self

    def nest(self, separator: str) -> DynamicConfig[M]:
        self._source_change()
        if not separator:
            raise ValueError("the nesting separator cannot be empty; the default is `__`")
        self._spec.nest = separator
        return self

    def allow_empty_env(self) -> DynamicConfig[M]:
        self._source_change()
        self._spec.allow_empty_env = True
        return self

    def strict_env(self) -> DynamicConfig[M]:
        self._source_change()
        self._spec.strict_env = True
        return self

    def whole_document(self) -> DynamicConfig[M]:
        self._source_change()
        self._spec.whole_document = True
        return self

    def env_file(self, path: str | Path) -> DynamicConfig[M]:
        self._source_change()
        self._spec.env_files.append(Path(path))
        return self

    def secrets_dir(
        self, path: str | Path, *, allow_external_symlinks: bool = False
    ) -> DynamicConfig[M]:
        self._source_change()
        self._spec.secrets_dir = Path(path)
        self._spec.allow_external_symlinks = allow_external_symlinks
        return self

    def profile_env(self, variable: str) -> DynamicConfig[M]:
        self._source_change()
        self._spec.profile_env = variable
        return self

    def bind_env(self, path: str, variable: str) -> DynamicConfig[M]:
        self._spec.bindings[path] = variable
        return self

    def alias(self, old: str, new: str) -> DynamicConfig[M]:
        self._spec.aliases.append((old, new))
        return self

    def cache(
        self, path: str | Path, mode: CacheMode | str = CacheMode.REDACTED
    ) -> DynamicConfig[M]:
        """Keep the last good section on disk, so a cold start whose sources fail starts
        from it (see :mod:`dynconf.cache`): ``redacted`` (no secret paths, the default),
        ``full`` or ``fingerprint`` (no values; reports drift, never recovers)."""
        self._source_change()
        chosen = CacheMode(mode)
        if chosen is CacheMode.REDACTED and self.model is None and not self._secrets:
            raise BackendError(
                "a redacted cache must know which paths are secret, and an untyped "
                "configuration does not say; pass DynamicConfig(None, key, secrets=[...]) "
                "or choose mode='full'",
                origin=Origin.file(str(path)),
            )
        self._cache = LastKnownGood(path, chosen, self._secrets)
        return self

    # ------------------------------------------------------------------ runtime layers
    def set_default(self, path: str, value: Value) -> DynamicConfig[M]:
        from dynconf.document import set_path

        set_path(self._spec.defaults, path, value)
        return self

    def set_defaults(self, values: Mapping[str, Value] | Any) -> DynamicConfig[M]:
        mapping = values.model_dump() if hasattr(values, "model_dump") else dict(values)
        for key, value in mapping.items():
            self.set_default(key, value)
        return self

    def set_override(self, path: str, value: Value) -> DynamicConfig[M]:
        self._spec.overrides[path] = value
        return self

    def set_assignments(self, assignments: Collection[str]) -> DynamicConfig[M]:
        """The flag layer from ``path=value`` strings, typed by the text grammar."""
        for assignment in assignments:
            path, eq, raw = assignment.partition("=")
            if not eq:
                raise BackendError(
                    f"the assignment `{path}` has no `=`; write it as path=value",
                    origin=Origin.runtime("command-line flag"),
                )
            self._spec.flags[path.strip()] = type_text(raw)
        return self

    def clear_defaults(self) -> None:
        self._spec.defaults.clear()

    def clear_overrides(self) -> None:
        self._spec.overrides.clear()

    def clear_assignments(self) -> None:
        self._spec.flags.clear()

    @contextlib.contextmanager
    def overrides(self, **values: Value) -> Iterator[M]:
        """Override paths (``__`` in a keyword means ``.``) for a block, then restore."""
        saved = dict(self._spec.overrides)
        for name, value in values.items():
            self._spec.overrides[name.replace("__", ".")] = value
        try:
            yield self.reload()
        finally:
            self._spec.overrides.clear()
            self._spec.overrides.update(saved)
            self.reload()

    # ------------------------------------------------------------------ lifecycle
    @property
    def key(self) -> str:
        return self._spec.key

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
        self._watch = None
        self._remote_watch = None
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

    def _spec_for_load(self) -> LoadSpec:
        slot = self._remote
        remote = slot.document if slot is not None else None
        return replace(self._spec, remote=remote)

    def _resolve_and_validate(self) -> tuple[Resolved, M]:
        resolved = resolve(self._spec_for_load())
        model = self._adapter.validate(resolved.section, key=self.key)
        return resolved, model

    def load(self) -> M:
        """Resolve and validate without installing anything."""
        self._loaded_once = True
        return self._resolve_and_validate()[1]

    def init(self) -> M:
        """The first install (reason ``initial``); raises when the first load fails.

        A remote source that has never been fetched is fetched first. With a
        :meth:`cache`, a failed first load starts from the last good document instead
        (reason ``recovered``) and raises only when that cannot load either.
        """
        slot = self._remote
        if slot is not None and slot.fetches == 0 and is_async_source(slot.source):
            # loading without it would install a configuration that silently lacks the store
            raise BackendError(
                f"the remote source {slot.description} is async and has not been fetched; "
                "call `await init_async()` (or `await refresh_remote_async()` first)",
                origin=Origin.remote(slot.description),
            )
        if slot is not None and slot.fetches == 0:
            try:
                self.refresh_remote()
            except DynconfError as error:
                return self._recover_or_refuse(error)
        try:
            return self._reload(ReloadReason.INITIAL)
        except DynconfError as error:
            return self._recover(error)

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
            self._spec,
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

    async def init_async(self) -> M:
        """:meth:`init` off the event loop; an async remote source is fetched on the loop."""
        try:
            if self._remote is not None:
                await self.refresh_remote_async()
        except DynconfError as error:
            return await self._blocking(self._recover_or_refuse, error)
        return await self._blocking(self.init)

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

    def fingerprint(self) -> str:
        """The installed configuration's fingerprint: what to POST to the agent's ``/applied``.

        It is :func:`dynconf.document.digest` of the bytes of the highest-precedence document
        the load read (the file the agent rendered, or the store's text), exactly the string
        the agent wrote to ``.<name>.meta``, whichever section this config reads and
        whatever defaults or environment layer over it. With no document at all (defaults
        and environment only) it is the digest of the installed section's canonical JSON.
        """
        snapshot = self._snapshot
        if snapshot is None:
            self._not_initialised()
        assert snapshot is not None
        if not snapshot.fingerprint:
            digests = snapshot.resolved.digests
            snapshot.fingerprint = (
                digests[-1] if digests else fingerprint(snapshot.resolved.section)
            )
        return snapshot.fingerprint

    def source_of(self, path: str) -> Origin | None:
        """Which layer supplied the installed value at ``path`` (``None`` if nothing did)."""
        return self._resolved().source_of(path)

    def resolve(self) -> Resolved:
        """Read the sources now (the remote layer as last fetched), validating and
        installing nothing: what the next reload would start from."""
        return resolve(self._spec_for_load())

    @property
    def secret_paths(self) -> frozenset[str]:
        """The paths masked in ``explain`` and dropped by a redacted cache."""
        return self._secrets

    def is_set(self, path: str) -> bool:
        """Whether any source supplies ``path`` now (the sources are read again, so it
        answers before ``init()`` and after a refused reload)."""
        return has_path(self.resolve().section, path)

    def check(self) -> Report:
        """Would the sources load now, and which keys does the model not declare?

        Reads the sources and validates, installing nothing and recording no refusal.
        """
        try:
            resolved = self.resolve()
        except DynconfError as error:
            return Report(self.key, (), (), str(error), error.kind.value, error.path)
        leaves = tuple(
            ResolvedLeaf(path, resolved.source_of(path)) for path in leaf_paths(resolved.section)
        )
        unknown = unknown_keys(self.model, resolved.section)
        failure: DynconfError | None = None
        try:
            self._adapter.validate(resolved.section, key=self.key)
        except DynconfError as error:
            failure = error
        field_errors: list[FieldError] = []
        for entry in failure.errors if isinstance(failure, InvalidError) else ():
            loc = entry.get("loc")
            path = ".".join(str(part) for part in loc) if isinstance(loc, tuple) else ""
            field_errors.append(
                FieldError(path, str(entry.get("msg") or ""), resolved.source_of(path))
            )
        return Report(
            key=self.key,
            resolved=leaves,
            unknown=tuple(unknown or ()),
            failure=None if failure is None else str(failure),
            failure_kind=None if failure is None else failure.kind.value,
            failure_path=None if failure is None else failure.path,
            unknown_checked=unknown is not None,
            field_errors=tuple(field_errors),
        )

    def snapshot(self) -> Snapshot:
        """The installed section and its provenance, without the model."""
        snapshot = self._snapshot
        if snapshot is None:
            self._not_initialised()
        assert snapshot is not None
        resolved = snapshot.resolved
        return Snapshot(
            resolved.section, resolved.origins, snapshot.generation, snapshot.reason.value
        )

    def replace(self, model: M) -> M:
        """Install a model built by the caller (reason ``replaced``): hooks, streams and the
        generation move as for a reload; the cache is not written (no source produced it)."""
        expected = self.model
        if expected is None:
            if not isinstance(model, Mapping):
                raise TypeError(f"replace() takes a Values mapping, not {type(model).__name__}")
            if not isinstance(model, Values):
                model = typing.cast(M, Values(dict(model)))
        elif isinstance(expected, type) and not isinstance(model, expected):
            raise TypeError(f"replace() takes a {expected.__name__}, not {type(model).__name__}")
        section = _section_of(model)
        resolved = Resolved(
            section,
            [Contribution("replaced", Origin.runtime("replace()"), section)],
            documents=[],
            copies=[],
            files=[],
            dirs=[],
        )
        with self._lock:
            self._loaded_once = True
            old, snapshot = self._install(
                resolved, model, ReloadReason.REPLACED, time.perf_counter()
            )
        self._announce(old, snapshot)
        return model

    def explain(self, path: str) -> Any:
        """Every layer that supplied ``path``, lowest first; secret paths shown as ``***``."""
        return self._resolved().explain(path, secrets=self._secrets)

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

    def __repr__(self) -> str:
        return (
            f"<DynamicConfig {self._adapter.name} key={self.key!r} generation={self._generation}>"
        )

    # ------------------------------------------------------------------ notification
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

    async def watch_async(
        self, debounce: float = DEFAULT_DEBOUNCE, poll_interval: float | None = None
    ) -> FileWatch:
        """:meth:`watch`, started off the loop (registering directories is blocking work)."""
        return await self._blocking(self.watch, debounce, poll_interval)

    @contextlib.asynccontextmanager
    async def watching_async(
        self, debounce: float = DEFAULT_DEBOUNCE, poll_interval: float | None = None
    ) -> AsyncIterator[FileWatch]:
        watch = await self.watch_async(debounce, poll_interval)
        try:
            yield watch
        finally:
            watch.stop()
            await self._blocking(watch.join, 2.0)

    def _follows(self, watch: bool) -> tuple[bool, bool]:
        """What :meth:`running` follows: (files, remote)."""
        spec = self._spec
        files = any(isinstance(f, Path) for f in spec.files)
        local = bool(files or spec.discover or spec.env_files or spec.secrets_dir)
        return watch and local, watch and self._remote is not None

    @contextlib.contextmanager
    def running(
        self,
        watch: bool = True,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        remote_interval: float = 15.0,
    ) -> Iterator[M]:
        """``init()``, then follow every input (files and the remote store) until the block
        ends, then stop. Yields the first model; later installs go to ``current()``."""
        model = self.init()
        with self.following(watch, debounce, poll_interval, remote_interval):
            yield model

    @contextlib.contextmanager
    def following(
        self,
        watch: bool = True,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        remote_interval: float = 15.0,
    ) -> Iterator[None]:
        """:meth:`running` without the ``init()``: follow the files and the remote store
        until the block ends. For a process forked after ``init()`` (a prefork worker), which
        keeps the parent's snapshot but none of its watcher threads."""
        files, remote = self._follows(watch)
        with contextlib.ExitStack() as stack:
            if files:
                stack.enter_context(self.watching(debounce, poll_interval))
            if remote:
                follower = self.watch_remote(remote_interval)
                stack.callback(follower.join, 2.0)
                stack.callback(follower.stop)
            yield

    @contextlib.asynccontextmanager
    async def running_async(
        self,
        watch: bool = True,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        remote_interval: float = 15.0,
    ) -> AsyncIterator[M]:
        """:meth:`running` for a service on an event loop; the shape of an ASGI lifespan."""
        model = await self.init_async()
        files, remote = self._follows(watch)
        async with contextlib.AsyncExitStack() as stack:
            if files:
                await stack.enter_async_context(self.watching_async(debounce, poll_interval))
            if remote:
                follower = self.watch_remote(remote_interval)

                async def stop_following() -> None:
                    follower.stop()
                    await self._blocking(follower.join, 2.0)

                stack.push_async_callback(stop_following)
            yield model

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

    # ------------------------------------------------------------------ file watching
    def watch(
        self, debounce: float = DEFAULT_DEBOUNCE, poll_interval: float | None = None
    ) -> FileWatch:
        """Start watching every file input; each settled change reloads (``file-changed``).

        One watcher per configuration; a refused reload keeps the previous snapshot.
        """
        return self._start_watch(
            debounce, poll_interval, lambda _trigger: self._reload(ReloadReason.FILE_CHANGED)
        )

    def _start_watch(
        self,
        debounce: float,
        poll_interval: float | None,
        on_settled: Callable[[Path], object],
    ) -> FileWatch:
        if self._watch is not None and self._watch.running:
            raise OSError("could not start watching: this configuration already has a watcher")
        resolved = self._snapshot.resolved if self._snapshot else resolve(self._spec_for_load())
        files = {p.absolute() for p in resolved.watched_files()}
        secrets_dir = self._spec.secrets_dir.absolute() if self._spec.secrets_dir else None
        discovery = {
            (d.expanduser().absolute(), name) for name, dirs in self._spec.discover for d in dirs
        }
        directories = {p.parent for p in files} | {d.absolute() for d in resolved.watched_dirs()}
        discoverable = frozenset(default_registry().discovery_extensions())

        def relevant(path: Path) -> bool:
            path = path.absolute()
            if path in files or path.name.startswith(".."):
                return True
            if secrets_dir is not None and path.parent == secrets_dir:
                return True
            stem, _, ext = path.name.rpartition(".")
            return (path.parent, stem) in discovery and ext in discoverable

        def on_error(error: BaseException) -> None:
            if not isinstance(error, DynconfError):
                log.error("config_watch_error", extra={"config": self.key})

        self._watch = FileWatch(
            directories,
            relevant,
            on_settled,
            debounce=debounce,
            poll_interval=poll_interval,
            on_error=on_error,
            name=f"dynconf-watch-{self.key}",
        ).start()
        return self._watch

    @contextlib.contextmanager
    def watching(
        self, debounce: float = DEFAULT_DEBOUNCE, poll_interval: float | None = None
    ) -> Iterator[FileWatch]:
        watch = self.watch(debounce, poll_interval)
        try:
            yield watch
        finally:
            watch.stop()
            watch.join(2.0)

    # ------------------------------------------------------------------ remote
    def remote(self, source: RemoteSource | AsyncRemoteSource) -> DynamicConfig[M]:
        """Use a store as the remote layer; the document arrives with ``refresh_remote``."""
        self._remote_generation += 1
        self._remote = _RemoteSlot(
            source=source, description=source.describe(), generation=self._remote_generation
        )
        return self

    def clear_remote(self) -> None:
        if self._remote is not None:
            self._remote.document = None

    @property
    def watching_now(self) -> bool:
        """Whether a file watch or a remote follower of this configuration is running."""
        files, remote = self._watch, self._remote_watch
        return bool(
            (files is not None and files.running) or (remote is not None and remote.running)
        )

    @property
    def remote_description(self) -> str | None:
        return None if self._remote is None else self._remote.description

    def remote_status(self) -> RemoteStatus | None:
        slot = self._remote
        if slot is None:
            return None
        return RemoteStatus(
            fetches=slot.fetches,
            last_fetch=slot.last_fetch,
            last_fetch_duration=slot.last_fetch_duration,
            consecutive_failures=slot.consecutive_failures,
            last_failure=slot.last_failure,
        )

    def _store_answer(
        self, slot: _RemoteSlot, answer: Fetched | Absent, took: float | None
    ) -> None:
        if slot.generation != self._remote_generation:
            return  # the source was replaced while this fetch was in flight
        slot.document = (
            None
            if isinstance(answer, Absent)
            else RemoteDocument(
                text=answer.text, format=answer.format, description=slot.description
            )
        )
        slot.fetches += 1
        slot.last_fetch = time.monotonic()
        slot.last_fetch_duration = took
        slot.consecutive_failures = 0

    def _fetch_failed(self, slot: _RemoteSlot, error: BaseException) -> DynconfError:
        wrapped = (
            error
            if isinstance(error, DynconfError)
            else RemoteError(
                f"{slot.description} could not be read ({type(error).__name__}); check that the "
                "store is reachable",
                origin=Origin.remote(slot.description),
            )
        )
        if wrapped is not error:
            wrapped.__cause__ = error
        slot.consecutive_failures += 1
        slot.last_failure = Failure(wrapped.kind.value, wrapped.path, time.monotonic())
        return wrapped

    def _slot(self) -> _RemoteSlot:
        if self._remote is None:
            raise MissingError("no remote source is set; call remote(source) first")
        return self._remote

    def refresh_remote(self) -> None:
        """Fetch the remote document now and keep it for the next load (no reload)."""
        slot = self._slot()
        source = slot.source
        if is_async_source(source):
            raise BackendError("this remote source is async; use refresh_remote_async()")
        assert isinstance(source, RemoteSource)
        started = time.perf_counter()
        try:
            answer = source.fetch()
        except Exception as exc:
            raise self._fetch_failed(slot, exc) from exc
        self._store_answer(slot, answer, time.perf_counter() - started)

    async def refresh_remote_async(self) -> None:
        slot = self._slot()
        started = time.perf_counter()
        try:
            source = slot.source
            if is_async_source(source):
                answer = await typing.cast(AsyncRemoteSource, source).fetch()
            else:
                answer = await self._blocking(typing.cast(RemoteSource, source).fetch)
        except Exception as exc:
            raise self._fetch_failed(slot, exc) from exc
        self._store_answer(slot, answer, time.perf_counter() - started)

    def watch_remote(self, interval: float = 15.0) -> RemoteWatch:
        """Follow the remote store in a thread: each delivery reloads (``remote-changed``).

        Failures back off (doubling from ``interval`` up to four times it, between 30 s and
        300 s) and reopen the store's watch; a refused reload keeps the previous snapshot.
        """
        self._remote_watch = RemoteWatch(self, self._slot(), interval).start()
        return self._remote_watch

    def _deliver(self, slot: _RemoteSlot, answer: Fetched | Absent) -> None:
        """Keep a delivered document and reload, unless it is the one already kept."""
        with self._lock:
            kept = slot.document
            if isinstance(answer, Absent) and kept is None:
                return
            if (
                isinstance(answer, Fetched)
                and kept is not None
                and (kept.text, kept.format) == (answer.text, answer.format)
            ):
                return
            self._store_answer(slot, answer, None)
        self.try_reload(ReloadReason.REMOTE_CHANGED)


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


def _section_of(model: Any) -> Document:
    """A model as plain data, for a :meth:`DynamicConfig.replace` snapshot."""
    if isinstance(model, Values):
        return model.to_dict()
    if hasattr(model, "model_dump"):
        return typing.cast(Document, model.model_dump(mode="python"))
    if dataclasses.is_dataclass(model) and not isinstance(model, type):
        return dataclasses.asdict(model)
    if isinstance(model, Mapping):
        return dict(model)
    return {}


_LIVE: weakref.WeakSet[DynamicConfig[Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for config in list(_LIVE):
        config._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


class RemoteWatch:
    """The thread behind :meth:`DynamicConfig.watch_remote`: the shared follower, on a loop.

    :class:`dynconf.follow.Follower` is the one place that follows a store (the agent, the
    node agent, the config server and ``render --watch`` use it too): the store's own watch,
    a resync every interval for push stores, the catch-up read after a poll watch primes,
    backoff between reopenings. Here it runs on an event loop of its own in one daemon
    thread; each answer it hands over is delivered to the configuration (a reload when the
    document moved).
    """

    def __init__(self, config: DynamicConfig[Any], slot: _RemoteSlot, interval: float) -> None:
        self._config = config
        self._slot = slot
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dynconf-remote", daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def start(self) -> RemoteWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        anyio.run(self._follow)

    async def _follow(self) -> None:
        driver = StoreDriver(self._slot.source)
        inbox = Slot()

        async def fetch(_kind: str) -> Fetched | Absent:
            try:
                return await driver.fetch()
            except Exception as exc:
                self._config._fetch_failed(self._slot, exc)
                raise

        follower = Follower(
            driver, self._interval, inbox, fetch=fetch, events=_RemoteEvents(self), log=log,
            extra={"config": self._config.key},
        )  # fmt: skip
        kept = self._slot.document
        follower.seen(Fetched(kept.text, kept.format) if kept is not None else None)
        async with anyio.create_task_group() as group:
            group.start_soon(follower.run)
            group.start_soon(self._consume, inbox)
            while not self._stop.is_set():
                await anyio.sleep(0.1)
            group.cancel_scope.cancel()

    async def _consume(self, inbox: Slot) -> None:
        while True:
            delivery = await inbox.take()
            await anyio.to_thread.run_sync(self._config._deliver, self._slot, delivery.answer)

    def watch_failed(self, error: BaseException) -> None:
        self._config._fetch_failed(self._slot, error)


class _RemoteEvents(FollowEvents):
    """A watch that ends in an error counts as a failed read of the remote (its status)."""

    def __init__(self, watch: RemoteWatch) -> None:
        self._watch = watch

    def watch_error(self, error: BaseException) -> None:
        self._watch.watch_failed(error)
