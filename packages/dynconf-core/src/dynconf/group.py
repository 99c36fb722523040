"""``ConfigGroup``: several configurations with one lifecycle, reloadable all-or-none.

The group owns lifecycle (init, watch, stop) and the atomic reload; it never sits on the
read path — ``db.current()`` is still an attribute read on the member.

``reload_atomic()`` is prepare-then-commit: every member resolves and validates under its
own lock (taken in one fixed order, so two groups sharing a member cannot deadlock); only
when all have validated does any install. A refusal is recorded on the member that refused
(its status and events say so), the error names it, and no member's snapshot or
generation moves. With ``watch(atomic=True)`` a settled file change in any member reloads
the whole group that way, so a deploy that moves three files never runs on two new
documents and one old one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Executor
from typing import Any

from dynconf.concurrency import run_blocking
from dynconf.config import ConfigStatus, DynamicConfig, ReloadReason
from dynconf.errors import DynconfError
from dynconf.watch import DEFAULT_DEBOUNCE, FileWatch

__all__ = ["ConfigGroup"]

log = logging.getLogger("dynconf.engine")

_VIEW_ATTEMPTS = 16
"""Lock-free tries :meth:`ConfigGroup.views` makes before it takes the members' locks."""


class ConfigGroup:
    """Several :class:`DynamicConfig` members, started, followed and stopped together."""

    def __init__(self, *configs: DynamicConfig[Any], executor: Executor | None = None) -> None:
        """``executor`` runs the blocking half of the ``_async`` calls, as for a member."""
        self.executor = executor
        if not configs:
            raise ValueError("a ConfigGroup needs at least one configuration")
        keys = [config.key for config in configs]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise ValueError(
                f"two members of one group share the key {', '.join(map(repr, repeated))}; "
                "a group reports per key, so give each member its own key or group them apart"
            )
        self._configs = tuple(configs)
        self._watches: list[FileWatch] = []
        self._commits = 0
        """Odd while :meth:`reload_atomic` installs, bumped again when it is done: the
        sequence :meth:`views` reads around its lock-free reads."""

    @property
    def configs(self) -> tuple[DynamicConfig[Any], ...]:
        return self._configs

    def __iter__(self) -> Iterator[DynamicConfig[Any]]:
        return iter(self._configs)

    def __len__(self) -> int:
        return len(self._configs)

    def __repr__(self) -> str:
        return f"<ConfigGroup {', '.join(config.key for config in self._configs)}>"

    # ------------------------------------------------------------------ lifecycle
    def init(self) -> None:
        """Load every member in order; the first failure raises (members already loaded
        keep what they loaded)."""
        for config in self._configs:
            config.init()

    async def init_async(self) -> None:
        for config in self._configs:
            await config.init_async()

    def reload(self) -> None:
        """Reload every member independently; raises the first refusal after all tried."""
        failures: list[DynconfError] = []
        for config in self._configs:
            try:
                config.reload()
            except DynconfError as error:
                failures.append(error)
        if failures:
            raise failures[0]

    def reload_atomic(self, reason: ReloadReason = ReloadReason.MANUAL) -> None:
        """Every member validates, then every member installs; or none installs."""
        ordered = sorted(self._configs, key=id)
        started = time.perf_counter()
        installed = []
        with contextlib.ExitStack() as locks:
            for config in ordered:
                locks.enter_context(config._lock)
            prepared = []
            for config in self._configs:
                config._loaded_once = True
                try:
                    prepared.append((config, *config._prepare()))
                except DynconfError as error:
                    error.add_note(
                        f"config group: `{config.key}` refused, so no member was installed"
                    )
                    raise
            self._commits += 1
            try:
                for config, resolved, model in prepared:
                    installed.append((config, *config._install(resolved, model, reason, started)))
            finally:
                self._commits += 1
        for config, old, snapshot in installed:
            config._announce(old, snapshot)

    async def reload_atomic_async(self, reason: ReloadReason = ReloadReason.MANUAL) -> None:
        await run_blocking(self.reload_atomic, reason, executor=self.executor)

    # ------------------------------------------------------------------ watching
    def watch(
        self,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        *,
        atomic: bool = False,
    ) -> ConfigGroup:
        """Watch every member's files; ``atomic`` reloads the whole group on any change."""
        try:
            for config in self._configs:
                if atomic:
                    watch = config._start_watch(debounce, poll_interval, self._changed)
                else:
                    watch = config.watch(debounce, poll_interval)
                self._watches.append(watch)
        except BaseException:
            self.stop()
            raise
        return self

    def _changed(self, _trigger: object) -> None:
        # a refusal is recorded on the member that refused; every member keeps its snapshot
        with contextlib.suppress(DynconfError):
            self.reload_atomic(ReloadReason.FILE_CHANGED)

    def stop(self) -> None:
        """Stop every watcher the group started (idempotent)."""
        while self._watches:
            watch = self._watches.pop()
            watch.stop()
            watch.join(2.0)

    @contextlib.contextmanager
    def watching(
        self,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        *,
        atomic: bool = False,
    ) -> Iterator[ConfigGroup]:
        self.watch(debounce, poll_interval, atomic=atomic)
        try:
            yield self
        finally:
            self.stop()

    @contextlib.asynccontextmanager
    async def watching_async(
        self,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        *,
        atomic: bool = False,
    ) -> AsyncIterator[ConfigGroup]:
        await run_blocking(
            lambda: self.watch(debounce, poll_interval, atomic=atomic), executor=self.executor
        )
        try:
            yield self
        finally:
            await run_blocking(self.stop, executor=self.executor)

    @contextlib.contextmanager
    def running(
        self,
        watch: bool = True,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        *,
        atomic: bool = False,
    ) -> Iterator[ConfigGroup]:
        """``init()``, then watch, then stop: the group's whole life as one block."""
        self.init()
        with contextlib.ExitStack() as stack:
            if watch:
                stack.enter_context(self.watching(debounce, poll_interval, atomic=atomic))
            yield self

    @contextlib.asynccontextmanager
    async def running_async(
        self,
        watch: bool = True,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        *,
        atomic: bool = False,
    ) -> AsyncIterator[ConfigGroup]:
        """:meth:`running` on an event loop; the shape of an ASGI lifespan."""
        await self.init_async()
        async with contextlib.AsyncExitStack() as stack:
            if watch:
                await stack.enter_async_context(
                    self.watching_async(debounce, poll_interval, atomic=atomic)
                )
            yield self

    def views(self) -> dict[str, tuple[Any, int] | None]:
        """Every member's ``view()`` (model, generation), all from one side of any atomic
        reload: never two members from before it and one from after.

        Lock-free on the read path: the reads are retried while an atomic install is under
        way or when a member's generation moved between the two passes; after a few
        retries the members' locks are taken, so the answer is always consistent."""
        for _ in range(_VIEW_ATTEMPTS):
            commits = self._commits
            if commits % 2 == 0:
                views = {config.key: config.view() for config in self._configs}
                if self._commits == commits and all(
                    view is None or view[1] == config.generation
                    for config, view in zip(self._configs, views.values(), strict=True)
                ):
                    return views
            time.sleep(0)
        with contextlib.ExitStack() as locks:
            for config in sorted(self._configs, key=id):
                locks.enter_context(config._lock)
            return {config.key: config.view() for config in self._configs}

    # ------------------------------------------------------------------ diagnostics
    def status(self) -> dict[str, ConfigStatus]:
        return {config.key: config.status() for config in self._configs}

    def generations(self) -> dict[str, int]:
        return {config.key: config.generation for config in self._configs}
