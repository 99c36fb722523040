"""The server's documents: one per section, built once and rebuilt on change, never per request.

A section's document is resolved by dynconf-core (:func:`dynconf.resolve.resolve`): its
files, each followed by its profile variant (``billing.toml`` → ``billing.prod.toml``), then
the documents its stores last answered (folded with the core's one merge rule, later wins),
then the environment prefix. The built document is installed with a new generation only when
it differs from the previous one; the response body and ETag are serialised once, at install.

Each store is followed by :class:`dynconf.follow.Follower`, the one follower every process
shares (watch, resync every ``store_interval`` for push stores, the catch-up read after a poll
watch primes, backoff); its newest answer rebuilds the section. A failing store keeps its last
good document; the section is then *stale* (still served, reported stale) until the store
answers again.

Each build is one ``rebuild`` span (:mod:`dynconf.tracing`, exported only when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set): the section, whether it was the initial load, the
outcome (``installed``, ``unchanged``, ``failed``) and the generation — never the document.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from dynconf.budget import ledger
from dynconf.document import Document, deep_merge, fingerprint
from dynconf.errors import DynconfError
from dynconf.follow import Follower, FollowEvents, Slot, StoreDriver
from dynconf.plugins import Registry, default_registry
from dynconf.resolve import LoadSpec, RemoteDocument, resolve
from dynconf.stores import Absent, Fetched, same_document
from dynconf.tracing import Tracing
from dynconf_store_configserver.server.settings import SectionSettings, Settings, StoreSettings

__all__ = ["PROFILE_VARIABLE", "Documents", "Section", "StoreFeed"]

PROFILE_VARIABLE: Final = "DYNCONF_SERVER_PROFILE"
"""The variable the server sets (in the environment it hands to resolution) to the section's
profile, so the core's profile-variant rule layers ``<file>.<profile>.<ext>`` after each file."""

log = logging.getLogger("dynconf.server")


@dataclass
class StoreFeed:
    """One store of a section: its follower, its last answer and whether it is failing."""

    settings: StoreSettings
    driver: StoreDriver | None = None
    slot: Slot = field(default_factory=Slot)
    follower: Follower | None = None
    last: Fetched | Absent | None = None
    failing: bool = False
    failures: int = 0

    @property
    def description(self) -> str:
        return self.driver.describe() if self.driver is not None else self.settings.spec.source


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
        self._tasks: list[asyncio.Task[None]] = []
        self.on_store_failure: Callable[[Section], None] | None = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = default_registry()
        return self._registry

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Build every store, load every section (a failure here is fatal), start following."""
        self._loop = asyncio.get_running_loop()
        for section in self.sections.values():
            for store in section.settings.stores:
                spec = store.resolved_spec()
                kind = self.registry.store(spec.source)
                driver = StoreDriver.built(
                    functools.partial(kind.build, spec), calls=ledger().for_spec(spec)
                )
                feed = StoreFeed(store, driver)
                section.feeds.append(feed)
                assert feed.driver is not None
                feed.last = await feed.driver.fetch()
            await self._rebuild(section, initial=True)
        for section in self.sections.values():
            for feed in section.feeds:
                self._follow(section, feed)
            self._tasks.append(asyncio.create_task(self._poll_files(section)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for section in self.sections.values():
            for feed in section.feeds:
                if feed.driver is not None:
                    with contextlib.suppress(Exception):  # a store that fails to close
                        await feed.driver.close()  # must not block shutdown

    # ------------------------------------------------------------------ stores
    def _follow(self, section: Section, feed: StoreFeed) -> None:
        """Follow the store (:mod:`dynconf.follow`: watch, resync, catch-up) into its slot."""
        assert feed.driver is not None
        assert self._loop is not None
        feed.follower = Follower(
            feed.driver, self.settings.store_interval, feed.slot,
            events=_FeedEvents(self, section, feed, self._loop),
            log=log, extra={"section": section.name, "store": feed.description},
        )  # fmt: skip
        feed.follower.seen(feed.last)
        self._tasks.append(asyncio.create_task(feed.follower.run()))
        self._tasks.append(asyncio.create_task(self._consume(section, feed)))

    async def _consume(self, section: Section, feed: StoreFeed) -> None:
        while True:
            delivery = await feed.slot.take()
            self._store_answered(section, feed, delivery.answer)

    def _store_failed(self, section: Section, feed: StoreFeed) -> None:
        """On the loop: the store failed (the follower logged why); serve the last good."""
        feed.failures += 1
        if not feed.failing:
            log.warning(
                "section_store_failed",
                extra={"section": section.name, "store": feed.description},
            )
        feed.failing = True
        if self.on_store_failure is not None:
            self.on_store_failure(section)

    def _store_answered(self, section: Section, feed: StoreFeed, answer: Fetched | Absent) -> None:
        feed.failing = False
        if feed.last is not None and same_document(answer, feed.last):
            return
        feed.last = answer
        self.request_rebuild(section)

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
                            "section_build_failed",
                            extra={"section": section.name, "kind": str(exc.kind),
                                   "reason": exc.message},
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
        # stat before reading: a write that lands between the read and a stat taken after it
        # would be recorded as seen and never rebuilt; stat first, and it is noticed next poll
        before = {path: _stat(path) for path in section.watched}
        resolved = resolve(spec, registry=self.registry)
        watched = {
            path: before[path] if path in before else _stat(path)
            for path in resolved.watched_files()
        }
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
            "section_installed", extra={"section": section.name, "generation": section.generation}
        )
        previous, section.changed = section.changed, asyncio.Event()
        previous.set()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        result = path.stat()
    except OSError:
        return None
    return (result.st_mtime_ns, result.st_size)


class _FeedEvents(FollowEvents):
    """A store's follower reporting into its section: failures mark the section stale.

    The source's own ``on_failure`` hook may fire on its watch thread, so every report is
    handed to the loop the sections live on.
    """

    def __init__(self, documents: Documents, section: Section, feed: StoreFeed,
                 loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
        self._documents, self._section, self._feed, self._loop = documents, section, feed, loop

    def _failed(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._documents._store_failed(self._section, self._feed)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(
                self._documents._store_failed, self._section, self._feed
            )

    def read_failed(self, kind: str) -> None:
        self._failed()

    def watch_failed(self) -> None:
        self._failed()

    def reopening(self) -> None:
        self._failed()
