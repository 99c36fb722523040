"""The node's documents: one fetch and one watch per document, many readers of each.

A *document* is what a :class:`~dynconf_k8s.node.attributes.DocumentKey` names — one store,
address, key and credential. A *reader* is one published volume: its own target, file name,
format, section and mode. The first volume to claim a document builds the store client,
fetches, renders its file and starts the document's watch; later volumes render from the
document already fetched and join the watch. Every document the watch accepts is rendered for
each reader with that reader's own spec, through the same :func:`dynconf.pipeline.prepare` /
:func:`~dynconf.pipeline.publish` the sidecar uses, and a reader whose render fails keeps its
last good file without holding up the others. The last reader to leave stops the watch and
closes the client.

The watch is the sidecar's: one :class:`dynconf.follow.Follower` per document (blocking
stores in a thread, async ones on the loop) feeds a latest-wins slot, reopens a watch that
ends or fails after a spread backoff, re-reads a push store every interval and before each
reopen, and reads a poll store (git, s3, vault) once more after each watch's first
observation, so a change made between the last read and the watch's prime is not lost.

Writes and reader changes of one document take that document's lock, so a volume that joins
while a change is being rendered gets either the old document and then the new one, or the
new one — never a file written after its unpublish removed it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from dynconf.errors import DynconfError, Origin
from dynconf.follow import READ_DEADLINE_FLOOR, Follower, Slot, StoreDriver
from dynconf.pipeline import Prepared, prepare, publish
from dynconf.publish import read_published, remove_published_file
from dynconf.stores import Absent, Fetched
from dynconf.tracing import Tracing
from dynconf_k8s.node.attributes import DocumentKey, VolumeSpec

__all__ = ["Documents", "PublishFailed", "Reader", "SharedDocument"]

log = logging.getLogger("dynconf_k8s.node")

BuildDriver = Callable[[VolumeSpec], StoreDriver]


class PublishFailed(Exception):
    """A publish that could not complete; ``code`` is the gRPC status name to answer with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _reason(error: BaseException) -> str:
    return str(error) if isinstance(error, DynconfError) else type(error).__name__


def _failure(error: Exception) -> tuple[str, str]:
    """(kind, one-line reason) of a reader's failed render or write, never a value.

    Anything, not only the engine's errors: one document must never end the process that
    serves every other volume on the node.
    """
    if isinstance(error, DynconfError):
        return error.kind.value, str(error)
    return "backend", f"the render failed ({type(error).__name__}); the last good file stays"


def _publish_failed(error: Exception) -> PublishFailed:
    kind, reason = _failure(error)
    return PublishFailed("INTERNAL", f"{'writing' if kind == 'io' else 'rendering'}: {reason}")


@dataclass
class Reader:
    """One published volume of a document, and the bytes last written for it."""

    volume: VolumeSpec
    written: bytes | None = None


@dataclass
class SharedDocument:
    """One document's client, watch and readers."""

    key: DocumentKey
    driver: StoreDriver
    interval: float
    readers: dict[Path, Reader] = field(default_factory=dict)
    latest: Fetched | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    slot: Slot = field(default_factory=Slot)
    follower: Follower | None = None
    renders: int = 0

    @property
    def origin(self) -> Origin:
        return Origin.remote(self.driver.describe())


def _write(reader: Reader, answer: Fetched, origin: Origin) -> bool:
    """Render and publish one reader's file; True when bytes were written (caller holds lock)."""
    request = reader.volume.request
    prepared: Prepared = prepare(answer, request, origin=origin)
    data = prepared.outputs[request.main.path]
    if reader.written == data and read_published(request.main.path, root=request.root) == data:
        return False
    # request.root is the volume's target: the directories ``path`` names are created and
    # walked from it without following a symlink the pod may have planted since
    publish(prepared, request)
    reader.written = data
    return True


class Documents:
    """Every document the node agent watches, keyed by what makes a read the same read."""

    def __init__(
        self, build: BuildDriver, task_group: TaskGroup, *, tracing: Tracing | None = None
    ) -> None:
        self._build = build
        self._tg = task_group
        self._tracing = tracing or Tracing()
        self._documents: dict[DocumentKey, SharedDocument] = {}
        self._targets: dict[Path, DocumentKey] = {}
        self._claiming: dict[DocumentKey, anyio.Lock] = {}
        self.builds = 0
        """Store clients built since start (one per document, however many readers)."""

    # ------------------------------------------------------------------ counts
    @property
    def documents(self) -> int:
        return len(self._documents)

    @property
    def readers(self) -> int:
        return sum(len(doc.readers) for doc in self._documents.values())

    @property
    def staleness(self) -> float:
        """Seconds since the least recently confirmed document was confirmed (0: none)."""
        now = time.monotonic()
        ages = [
            now - doc.follower.confirmed_at
            for doc in self._documents.values()
            if doc.follower is not None
        ]
        return max(ages, default=0.0)

    def document_of(self, target: Path) -> SharedDocument | None:
        key = self._targets.get(target)
        return self._documents.get(key) if key is not None else None

    def reader_of(self, target: Path) -> Reader | None:
        doc = self.document_of(target)
        return doc.readers.get(target) if doc is not None else None

    # ------------------------------------------------------------------ claim
    async def claim(self, volume: VolumeSpec, *, resume: bool = False) -> bool:
        """Publish ``volume``: its file is written before this returns (unless ``resume``).

        Returns False when the target was already published with the same spec (nothing to
        do). ``resume`` re-attaches a volume found after a restart without fetching: its file
        is already there, and the document's watch reads the store as it starts. Raises
        :class:`PublishFailed`.
        """
        existing = self.reader_of(volume.target)
        if existing is not None:
            if existing.volume == volume:
                return False
            raise PublishFailed(
                "ALREADY_EXISTS",
                "this target is already published with other volume attributes; unpublish it first",
            )
        lock = self._claiming.setdefault(volume.document, anyio.Lock())
        async with lock:
            doc = self._documents.get(volume.document)
            if doc is None:
                doc = await self._first_reader(volume, resume=resume)
            else:
                await self._join(doc, volume, resume=resume)
            self._targets[volume.target] = volume.document
        return True

    async def _first_reader(self, volume: VolumeSpec, *, resume: bool) -> SharedDocument:
        try:
            driver = await anyio.to_thread.run_sync(self._build, volume)
        except Exception as error:
            raise PublishFailed("INTERNAL", f"building the source: {_reason(error)}") from None
        self.builds += 1
        doc = SharedDocument(key=volume.document, driver=driver, interval=volume.interval)
        follower = Follower(
            driver,
            doc.interval,
            doc.slot,
            fetch=lambda kind: self._fetch(doc.driver, doc.key, kind, follower.read_deadline),
            log=log,
            extra={"document": doc.key.label()},
        )
        doc.follower = follower
        reader = Reader(volume)
        if not resume:
            try:
                answer = await self._fetch(driver, volume.document, "first")
                follower.seen(answer)
                if isinstance(answer, Absent):
                    raise PublishFailed(
                        "UNAVAILABLE",
                        "the first fetch: the document is not in the store; write it there "
                        'first or fix the volume attribute "key"',
                    )
                await anyio.to_thread.run_sync(self._render_first, doc, reader, answer)
            except BaseException as error:
                with anyio.CancelScope(shield=True):
                    await driver.close()
                if isinstance(error, PublishFailed):
                    raise
                if isinstance(error, Exception):
                    raise PublishFailed(
                        "UNAVAILABLE", f"the first fetch: {_reason(error)}"
                    ) from None
                raise
        doc.readers[volume.target] = reader
        self._documents[volume.document] = doc
        self._tg.start_soon(self._follow, doc, resume)
        log.info(
            "document_watched",
            extra={"document": doc.key.label(), "store": driver.describe(), "resumed": resume},
        )
        return doc

    @staticmethod
    def _render_first(doc: SharedDocument, reader: Reader, answer: Fetched) -> None:
        try:
            with doc.lock:
                _write(reader, answer, doc.origin)
                doc.latest = answer
        except Exception as error:
            raise _publish_failed(error) from None

    async def _join(self, doc: SharedDocument, volume: VolumeSpec, *, resume: bool) -> None:
        reader = Reader(volume)

        def attach() -> None:
            with doc.lock:
                if doc.latest is not None and not resume:
                    try:
                        _write(reader, doc.latest, doc.origin)
                    except Exception as error:
                        raise _publish_failed(error) from None
                doc.readers[volume.target] = reader

        if doc.latest is None and not resume:
            # the document's store has not answered since a restart: this reader needs a file
            # before its pod starts, so it reads once itself
            try:
                answer = await self._fetch(doc.driver, doc.key, "join")
            except Exception as error:
                raise PublishFailed("UNAVAILABLE", f"the first fetch: {_reason(error)}") from None
            if isinstance(answer, Absent):
                raise PublishFailed(
                    "UNAVAILABLE", "the first fetch: the document is not in the store"
                )
            assert doc.follower is not None
            doc.follower.put(answer, "first")
            with doc.lock:
                doc.latest = answer
        await anyio.to_thread.run_sync(attach)

    # ------------------------------------------------------------------ release
    async def release(self, target: Path) -> bool:
        """Unpublish ``target``: drop its reader, stop the watch with the last one.

        Returns whether a reader was known. Files are the caller's to delete (after this, no
        render writes into the target any more).
        """
        key = self._targets.get(target)
        if key is None:
            return False
        # the claim lock orders this against a claim of the same document, so a reader that
        # joins as the last one leaves never joins a watch that is being stopped
        async with self._claiming.setdefault(key, anyio.Lock()):
            self._targets.pop(target, None)
            doc = self._documents.get(key)
            if doc is None:
                return False

            def detach() -> None:
                with doc.lock:
                    doc.readers.pop(target, None)

            await anyio.to_thread.run_sync(detach)
            if not doc.readers:
                del self._documents[doc.key]
                doc.scope.cancel()
                log.info("document_released", extra={"document": doc.key.label()})
        return True

    async def close(self) -> None:
        """Stop every watch (the files stay: the kubelet still owns the volumes)."""
        for doc in list(self._documents.values()):
            doc.scope.cancel()
        self._documents.clear()
        self._targets.clear()

    # ------------------------------------------------------------------ follow
    async def _follow(self, doc: SharedDocument, resumed: bool) -> None:
        follower = doc.follower
        assert follower is not None
        with doc.scope:
            try:
                read_first = resumed
                while True:
                    try:
                        async with anyio.create_task_group() as tg:
                            # resumed after a restart: no answer of its own yet, read at once
                            tg.start_soon(partial(follower.run, read_first=read_first))
                            tg.start_soon(self._consume_forever, doc)
                    except Exception as error:  # this document's, never the node's: go on
                        log.warning(
                            "document_failed",
                            extra={"document": doc.key.label(), "reason": _reason(error)},
                        )
                        read_first = False
                        await anyio.sleep(doc.interval)
            finally:
                with anyio.CancelScope(shield=True):
                    await doc.driver.close()

    async def _fetch(
        self,
        driver: StoreDriver,
        key: DocumentKey,
        kind: str,
        deadline: float = READ_DEADLINE_FLOOR,
    ) -> Fetched | Absent:
        """One read of a shared document, as a ``fetch`` span (its label and store, no value);
        a resync reads apart from the watch, within ``deadline`` (:meth:`StoreDriver.read`)."""
        with self._tracing.span(
            "fetch", document=key.label(), store=driver.describe(), kind=kind
        ) as span:
            answer = await driver.read(kind, deadline)
            span.set(found=not isinstance(answer, Absent))
            return answer

    async def _consume_forever(self, doc: SharedDocument) -> None:
        while True:
            delivery = await doc.slot.take()
            answer = delivery.answer
            if isinstance(answer, Absent):
                log.warning(
                    "document_absent",
                    extra={"document": doc.key.label(), "readers": len(doc.readers)},
                )
                continue
            written = await anyio.to_thread.run_sync(self._fan_out, doc, answer)
            if written:
                log.info(
                    "rendered",
                    extra={
                        "document": doc.key.label(),
                        "files": written,
                        "revision": answer.revision,
                        "seconds": round(time.monotonic() - delivery.at, 4),
                    },
                )

    @staticmethod
    def _fan_out(doc: SharedDocument, answer: Fetched) -> int:
        """Render ``answer`` for every reader with its own spec; the number of files written."""
        with doc.lock:
            doc.latest = answer
            readers = list(doc.readers.items())
        written = 0
        origin = doc.origin
        for target, reader in readers:
            with doc.lock:
                if doc.readers.get(target) is not reader:
                    continue  # unpublished meanwhile: its target is no longer ours to write
                try:
                    if _write(reader, answer, origin):
                        written += 1
                except Exception as error:  # this reader's failure, never the node's
                    kind, reason = _failure(error)
                    log.warning(
                        "render_failed",
                        extra={
                            "document": doc.key.label(),
                            "pod": reader.volume.pod,
                            "kind": kind,
                            "reason": reason,
                        },
                    )
        doc.renders += written
        return written


def remove_published(volume: VolumeSpec | None, target: Path) -> None:
    """Delete what the node agent wrote inside ``target``, then the target if left empty.

    Only the reader's file (with its meta, history and the hidden scratch files a failed
    write could leave beside it), the directories the ``path`` created under the target,
    and the target itself when nothing else is in it: the CSI spec makes the target the
    plugin's to create and remove, and anything else found there is not ours to touch.
    """
    if volume is not None:
        # walked from the target without following a symlink: a directory the pod swapped
        # for one ends the walk, and nothing outside the volume is deleted
        remove_published_file(volume.out, root=target)
    with contextlib.suppress(OSError):
        target.rmdir()
