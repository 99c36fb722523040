"""``DynamicConfig``: typed, live configuration in-process — the facade.

Three parts, each in its own module, meet here:

* the **builder**: every source and runtime-layer method is a validated setter of
  :class:`~dynconf.resolve.LoadSpec`, the object ``dynconf resolve`` builds from a spec file,
  so a bad path or alias is the same refusal from either front end, raised by the call;
* the **lifecycle** (:class:`dynconf.lifecycle.ConfigLifecycle`): resolve → validate → install,
  generations, refusals, the cache, reload hooks and streams;
* the **remote layer** (:class:`dynconf.remote_layer.RemoteLayer`): the store, its one-shot
  reads and its follower.

What is left here is the wiring between them, the file watch and the diagnostics of the
installed snapshot.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
import typing
import weakref
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import replace
from pathlib import Path
from typing import Any

from dynconf.cache import CacheMode, LastKnownGood
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
    Origin,
)
from dynconf.follow import AsyncSourceError
from dynconf.layers import Contribution
from dynconf.lifecycle import (
    ConfigLifecycle,
    ConfigStatus,
    Failure,
    HookGuard,
    M,
    ReloadReason,
)
from dynconf.models import ModelAdapter, Values, secret_paths
from dynconf.plugins import default_registry
from dynconf.remote_layer import RemoteLayer, RemoteStatus, RemoteWatch
from dynconf.resolve import LoadSpec, Resolved, resolve
from dynconf.stores import AsyncRemoteSource, RemoteSource
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

log = logging.getLogger("dynconf.engine")


class DynamicConfig(ConfigLifecycle[M]):
    """A live, typed view of one configuration section.

    Build it with chained source methods, then ``init()``. Sources are fixed after the
    first load (except ``remote``, which may be set later); runtime layers (defaults,
    assignments, overrides) take effect on the next load.
    """

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
        super().__init__(ModelAdapter(model), key, executor)
        self._spec = LoadSpec(key=key)
        self._secrets = frozenset(secrets) | frozenset(secret_paths(model))
        self._remote = RemoteLayer()
        self._watch: FileWatch | None = None
        self._remote_watch: RemoteWatch | None = None
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
        self._spec.set_nest(separator)
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
        self._spec.bind(path, variable)
        return self

    def alias(self, old: str, new: str) -> DynamicConfig[M]:
        """Read ``old`` (or ``section::path``) as ``new`` when nothing supplies ``new``; a
        malformed path or a cycle is refused here, as ``dynconf resolve`` refuses it."""
        self._spec.add_alias(old, new)
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
    # ------------------------------------------------------------------ runtime layers
    def set_default(self, path: str, value: Value) -> DynamicConfig[M]:
        self._spec.set_default(path, value)
        return self

    def set_defaults(self, values: Mapping[str, Value] | Any) -> DynamicConfig[M]:
        mapping = values.model_dump() if hasattr(values, "model_dump") else dict(values)
        for key, value in mapping.items():
            self.set_default(key, value)
        return self

    def set_override(self, path: str, value: Value) -> DynamicConfig[M]:
        self._spec.set_override(path, value)
        return self

    def set_assignments(self, assignments: Collection[str]) -> DynamicConfig[M]:
        """The flag layer from ``path=value`` strings, typed by the text grammar; a batch
        with one bad assignment adds none of them."""
        self._spec.set_assignments(assignments)
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
            self._spec.set_override(name.replace("__", "."), value)
        try:
            yield self.reload()
        finally:
            self._spec.overrides.clear()
            self._spec.overrides.update(saved)
            self.reload()

    # ------------------------------------------------------------------ lifecycle
    def _after_fork_in_child(self) -> None:
        super()._after_fork_in_child()
        self._watch = None
        self._remote_watch = None

    def _spec_for_load(self) -> LoadSpec:
        return replace(self._spec, remote=self._remote.document)

    def init(self) -> M:
        """The first install (reason ``initial``); raises when the first load fails.

        A remote source that has never been fetched is fetched first. With a
        :meth:`cache`, a failed first load starts from the last good document instead
        (reason ``recovered``) and raises only when that cannot load either.
        """
        if self._remote.unread:
            try:
                self._remote.refresh()
            except AsyncSourceError:
                # loading without it would install a configuration that silently lacks the store
                description = self._remote.description
                raise AsyncSourceError(
                    f"the remote source {description} is async and has not been fetched; "
                    "call `await init_async()` (or `await refresh_remote_async()` first)",
                    origin=Origin.remote(description or ""),
                ) from None
            except DynconfError as error:
                return self._recover_or_refuse(error)
        try:
            return self._reload(ReloadReason.INITIAL)
        except DynconfError as error:
            return self._recover(error)

    async def init_async(self) -> M:
        """:meth:`init` off the event loop; an async remote source is fetched on the loop."""
        try:
            if self._remote.is_set:
                await self.refresh_remote_async()
        except DynconfError as error:
            return await self._blocking(self._recover_or_refuse, error)
        return await self._blocking(self.init)

    # ------------------------------------------------------------------ diagnostics

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

    def __repr__(self) -> str:
        return (
            f"<DynamicConfig {self._adapter.name} key={self.key!r} generation={self._generation}>"
        )

    # ------------------------------------------------------------------ following

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
        return watch and local, watch and self._remote.is_set

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
    # ------------------------------------------------------------------ remote
    def remote(self, source: RemoteSource | AsyncRemoteSource) -> DynamicConfig[M]:
        """Use a store as the remote layer; the document arrives with ``refresh_remote``."""
        self._remote.use(source)
        return self

    def clear_remote(self) -> None:
        self._remote.forget()

    @property
    def watching_now(self) -> bool:
        """Whether a file watch or a remote follower of this configuration is running."""
        files, remote = self._watch, self._remote_watch
        return bool(
            (files is not None and files.running) or (remote is not None and remote.running)
        )

    @property
    def remote_description(self) -> str | None:
        return self._remote.description

    def remote_status(self) -> RemoteStatus | None:
        return self._remote.status()

    def refresh_remote(self) -> None:
        """Fetch the remote document now and keep it for the next load (no reload)."""
        self._remote.refresh()

    async def refresh_remote_async(self) -> None:
        await self._remote.refresh_async(self.executor)

    def watch_remote(self, interval: float = 15.0) -> RemoteWatch:
        """Follow the remote store in a thread: each delivery reloads (``remote-changed``).

        Failures back off (doubling from ``interval`` up to four times it, between 30 s and
        300 s) and reopen the store's watch; a refused reload keeps the previous snapshot.
        """
        self._remote_watch = self._remote.follow(
            interval,
            lambda: self.try_reload(ReloadReason.REMOTE_CHANGED),
            self._lock,
            self.key,
        )
        return self._remote_watch


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
