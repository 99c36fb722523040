"""The server's documents: one per section, built once and rebuilt on change, never per request.

A section's document is resolved by dynconf-core (:func:`dynconf.resolve.resolve`): its
files, each followed by its profile variant (``billing.toml`` → ``billing.prod.toml``), then
the documents its stores last answered (folded with the core's one merge rule, later wins),
then the environment prefix. The built document is installed with a new generation only when
it differs from the previous one; the response body and ETag are serialised once, at install.

Stores are followed by their own push or conditional watch (``changes``) on a worker thread
(async stores on the loop), plus a resync fetch every ``store_interval``. A failing store
keeps its last good document; the section is then *stale* (still served, reported stale)
until the store answers again.

Each build is one ``rebuild`` span (:mod:`dynconf.tracing`, exported only when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set): the section, whether it was the initial load, the
outcome (``installed``, ``unchanged``, ``failed``) and the generation — never the document.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dynconf.document import Document, deep_merge, fingerprint
from dynconf.errors import DynconfError
from dynconf.plugins import Registry, default_registry
from dynconf.resolve import LoadSpec, RemoteDocument, resolve
from dynconf.stores import Absent, Fetched, Pace, is_async_source
from dynconf.tracing import Tracing
from dynconf_store_configserver.server.settings import SectionSettings, Settings, StoreSettings

__all__ = ["PROFILE_VARIABLE", "Documents", "Section", "StoreFeed"]

PROFILE_VARIABLE: Final = "DYNCONF_SERVER_PROFILE"
"""The variable the server sets (in the environment it hands to resolution) to the section's
profile, so the core's profile-variant rule layers ``<file>.<profile>.<ext>`` after each file."""

log = logging.getLogger("dynconf.server")


@dataclass
class StoreFeed:
    """One store of a section: its source, its last answer and whether it is failing."""

    settings: StoreSettings
    source: Any = None
    last: Fetched | Absent | None = None
    failing: bool = False
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def description(self) -> str:
        return str(self.source.describe()) if self.source is not None else self.settings.spec.source


@dataclass
class Section:
    """One ``<application>/<profile>`` and its installed document."""

    settings: SectionSettings
    feeds: list[StoreFeed] = field(default_factory=list)
    document: Document | None = None
    generation: int = 0
    body: bytes = b""
    etag: str = ""
    built_at: float = 0.0
    build_failing: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    watched: dict[Path, tuple[int, int] | None] = field(default_factory=dict)
    dirty: bool = False
    building: bool = False

    @property
    def stale(self) -> bool:
        return self.build_failing or any(feed.failing for feed in self.feeds)

    @property
    def name(self) -> str:
        return self.settings.name


class Documents:
    """Every section's document, its stores' watches, and the change signal streams wait on."""

    def __init__(self, settings: Settings, registry: Registry | None = None, *,
                 tracing: Tracing | None = None) -> None:  # fmt: skip
        self.settings = settings
        self._registry = registry
        self.tracing = tracing or Tracing()
        self.sections: dict[tuple[str, str], Section] = {
            (s.application, s.profile): Section(s) for s in settings.sections
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.on_store_failure: Callable[[Section], None] | None = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = default_registry()
        return self._registry

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Build every store, load every section (a failure here is fatal), start watching."""
        self._loop = asyncio.get_running_loop()
        for section in self.sections.values():
            for store in section.settings.stores:
                spec = store.resolved_spec()
                source = self.registry.store(spec.source).build(spec)
                feed = StoreFeed(store, source)
                section.feeds.append(feed)
                if hasattr(source, "on_failure"):
                    source.on_failure = self._failure_hook(section, feed)
                feed.last = await self._fetch(feed)
            await self._rebuild(section, initial=True)
        for section in self.sections.values():
            for feed in section.feeds:
                self._follow(section, feed)
            self._tasks.append(asyncio.create_task(self._poll_files(section)))

    async def stop(self) -> None:
        for section in self.sections.values():
            for feed in section.feeds:
                feed.stop.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for section in self.sections.values():
            for feed in section.feeds:
                await _close(feed.source)
        await asyncio.to_thread(self._join_threads)

    def _join_threads(self) -> None:
        for thread in self._threads:
            thread.join(5)

    # ------------------------------------------------------------------ stores
    async def _fetch(self, feed: StoreFeed) -> Fetched | Absent:
        source = feed.source
        if is_async_source(source):
            answer: Fetched | Absent = await source.fetch()
        else:
            answer = await asyncio.to_thread(source.fetch)
        return answer

    def _failure_hook(self, section: Section, feed: StoreFeed) -> Callable[[DynconfError], None]:
        def failed(error: DynconfError) -> None:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._store_failed, section, feed, error)

        return failed

    def _store_failed(self, section: Section, feed: StoreFeed, error: DynconfError) -> None:
        feed.failures += 1
        if not feed.failing:
            log.warning(
                "section store failing; serving the last good document",
                extra={"event": "section_store_failed", "section": section.name,
                       "store": feed.description, "kind": str(error.kind),
                       "reason": error.message},
            )  # fmt: skip
        feed.failing = True
        if self.on_store_failure is not None:
            self.on_store_failure(section)

    def _store_answered(self, section: Section, feed: StoreFeed, answer: Fetched | Absent) -> None:
        feed.failing = False
        if _same(answer, feed.last):
            return
        feed.last = answer
        self.request_rebuild(section)

    def _follow(self, section: Section, feed: StoreFeed) -> None:
        """Watch a store (thread or task) and resync it every ``store_interval``."""
        interval = self.settings.store_interval
        if is_async_source(feed.source):
            self._tasks.append(asyncio.create_task(self._watch_async(section, feed, interval)))
        else:
            thread = threading.Thread(
                target=self._watch_blocking, args=(section, feed, interval), daemon=True,
                name=f"dynconf-server-watch-{section.name}",
            )  # fmt: skip
            thread.start()
            self._threads.append(thread)
        self._tasks.append(asyncio.create_task(self._resync(section, feed, interval)))

    def _watch_blocking(self, section: Section, feed: StoreFeed, interval: float) -> None:
        assert self._loop is not None
        loop = self._loop
        pace = Pace(interval)
        while not feed.stop.is_set():
            try:
                for answer in feed.source.changes(interval, feed.stop.is_set):
                    pace.succeeded()
                    loop.call_soon_threadsafe(self._store_answered, section, feed, answer)
                return
            except Exception as exc:
                error = exc if isinstance(exc, DynconfError) else DynconfError(type(exc).__name__)
                loop.call_soon_threadsafe(self._store_failed, section, feed, error)
                pace.failed()
                if feed.stop.wait(pace.next_wait()):
                    return

    async def _watch_async(self, section: Section, feed: StoreFeed, interval: float) -> None:
        pace = Pace(interval)
        while True:
            try:
                changes: AsyncIterator[Fetched | Absent] = feed.source.changes(interval)
                async for answer in changes:
                    pace.succeeded()
                    self._store_answered(section, feed, answer)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc if isinstance(exc, DynconfError) else DynconfError(type(exc).__name__)
                self._store_failed(section, feed, error)
                pace.failed()
                await asyncio.sleep(pace.next_wait())

    async def _resync(self, section: Section, feed: StoreFeed, interval: float) -> None:
        """A plain fetch every interval: a stream's failure mode is silence."""
        pace = Pace(interval)
        while True:
            await asyncio.sleep(pace.next_wait())
            try:
                answer = await self._fetch(feed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc if isinstance(exc, DynconfError) else DynconfError(type(exc).__name__)
                self._store_failed(section, feed, error)
                pace.failed()
                continue
            pace.succeeded()
            self._store_answered(section, feed, answer)

    # ------------------------------------------------------------------ files
    async def _poll_files(self, section: Section) -> None:
        """Rebuild when a file (or a profile variant) appears, changes or disappears."""
        while True:
            await asyncio.sleep(self.settings.file_poll_seconds)
            if any(_stat(path) != seen for path, seen in section.watched.items()):
                self.request_rebuild(section)

    # ------------------------------------------------------------------ builds
    def request_rebuild(self, section: Section) -> None:
        """Rebuild soon; requests that arrive during a build coalesce into one more build."""
        if section.building:
            section.dirty = True
            return
        self._tasks.append(asyncio.create_task(self._rebuild(section)))

    async def _rebuild(self, section: Section, *, initial: bool = False) -> None:
        section.building = True
        try:
            while True:
                section.dirty = False
                with self.tracing.span("rebuild", section=section.name, initial=initial) as span:
                    try:
                        document, watched = await asyncio.to_thread(self._build, section)
                    except DynconfError as exc:
                        span.set(outcome="failed", kind=str(exc.kind))
                        if initial:
                            raise
                        section.build_failing = True
                        log.warning(
                            "section build failed; serving the last good document",
                            extra={"event": "section_build_failed", "section": section.name,
                                   "kind": str(exc.kind), "reason": exc.message},
                        )  # fmt: skip
                    else:
                        section.build_failing = False
                        section.watched = watched
                        before = section.generation
                        self._install(section, document)
                        span.set(
                            outcome="installed" if section.generation != before else "unchanged",
                            generation=section.generation,
                        )
                if not section.dirty:
                    return
        finally:
            section.building = False

    def _build(self, section: Section) -> tuple[Document, dict[Path, tuple[int, int] | None]]:
        """Resolve the section (files, stores, environment) with dynconf-core; off the loop."""
        settings = section.settings
        remote = self._stores_document(section)
        environ = dict(os.environ)
        environ[PROFILE_VARIABLE] = settings.profile
        spec = LoadSpec(
            key=settings.application,
            files=list(settings.files),
            remote=remote,
            env_prefix=settings.env_prefix,
            profile_env=PROFILE_VARIABLE,
            whole_document=settings.whole_document,
            environ=environ,
        )
        resolved = resolve(spec, registry=self.registry)
        watched = {path: _stat(path) for path in resolved.watched_files()}
        return resolved.section, watched

    def _stores_document(self, section: Section) -> RemoteDocument | None:
        """The section's stores folded into one remote layer (later store wins)."""
        merged: Document = {}
        described: list[str] = []
        for feed in section.feeds:
            answer = feed.last
            if not isinstance(answer, Fetched):
                continue
            fmt = self.registry.format_named(answer.format)
            from dynconf.errors import Origin
            from dynconf.layers import parse_document

            deep_merge(merged, parse_document(answer.text, fmt, Origin.remote(feed.description)))
            described.append(feed.description)
        if not described:
            return None
        if not section.settings.whole_document:
            # A store's document is the section itself; the resolver cuts by section key.
            merged = {section.settings.application: merged}
        return RemoteDocument(json.dumps(merged), "json", ", ".join(described))

    def _install(self, section: Section, document: Document) -> None:
        digest = fingerprint(document)
        if section.document is not None and section.etag.endswith(f'-{digest[:16]}"'):
            return
        section.generation += 1
        section.document = document
        section.built_at = time.time()
        section.etag = f'"{section.generation}-{digest[:16]}"'
        section.body = json.dumps(
            {"application": section.settings.application, "profile": section.settings.profile,
             "generation": section.generation, "config": document},
            ensure_ascii=False, separators=(",", ":"),
        ).encode()  # fmt: skip
        log.info(
            "section installed",
            extra={"event": "section_installed", "section": section.name,
                   "generation": section.generation},
        )  # fmt: skip
        previous, section.changed = section.changed, asyncio.Event()
        previous.set()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        result = path.stat()
    except OSError:
        return None
    return (result.st_mtime_ns, result.st_size)


def _same(left: Fetched | Absent | None, right: Fetched | Absent | None) -> bool:
    if not isinstance(left, Fetched) or not isinstance(right, Fetched):
        return left is right
    return left.text == right.text and left.format == right.format


async def _close(source: Any) -> None:
    if source is None:
        return
    try:
        if hasattr(source, "aclose"):
            await source.aclose()
        else:
            await asyncio.to_thread(source.close)
    except Exception:  # noqa: S110 - a store that fails to close must not block shutdown
        pass
