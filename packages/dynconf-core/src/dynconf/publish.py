"""Publishing: put rendered bytes on disk so a reader only ever sees a whole file.

Every write goes to a scratch file in the target's own directory (same filesystem, so the
rename is atomic), created exclusively without following a planted symlink, written,
given its final mode, fsynced, then renamed over the target; the directory is fsynced
after, best effort. A failure removes the scratch file and leaves the previous file in
place — the last good file keeps serving.

Two optional siblings describe a published file without ever containing it:

* history — ``<dir>/.<name>.history/<unix>-<first 12 hex of sha256>.<ext>`` keeps the
  generation a rename is about to replace (same mode as that file, at most
  :data:`MAX_HISTORY`, oldest pruned by name), because after the rename the question
  "what was the file before?" otherwise has no answer;
* meta — ``<dir>/.<name>.meta``, JSON with the ``sha256:`` fingerprint of the written bytes,
  the store's revision and the render time, written after the document with its mode, so
  an application can acknowledge exactly what it read.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from dynconf.document import digest
from dynconf.errors import BackendError, IoError, Origin

__all__ = [
    "MAX_HISTORY",
    "MetaInfo",
    "Published",
    "digest",
    "history_dir",
    "meta_path",
    "publish_file",
    "read_published",
    "safe_child",
    "write_meta",
]

MAX_HISTORY: Final = 10
"""Most generations history keeps; every kept copy is charged to the volume's memory."""

_SCRATCH_ATTEMPTS: Final = 16
_counter = itertools.count()


@dataclass(frozen=True, slots=True)
class MetaInfo:
    """What the meta file records besides the fingerprint of the bytes."""

    revision: str | None = None
    rendered_at: int | None = None
    """Unix seconds; ``None`` means now, taken when the meta file is written."""


@dataclass(frozen=True, slots=True)
class Published:
    """One file as it was published."""

    path: Path
    fingerprint: str
    size: int
    history_entry: Path | None = None
    meta_file: Path | None = None


def meta_path(path: str | os.PathLike[str]) -> Path:
    """``<dir>/.<name>.meta`` for a published file."""
    target = Path(path)
    return target.with_name(f".{target.name}.meta")


def history_dir(path: str | os.PathLike[str]) -> Path:
    """``<dir>/.<name>.history`` for a published file."""
    target = Path(path)
    return target.with_name(f".{target.name}.history")


def _origin(path: Path) -> Origin:
    return Origin.file(str(path))


def _check_mode(mode: int | None, path: Path) -> None:
    if mode is not None and not 0 <= mode <= 0o777:
        raise BackendError(
            f"the file mode {mode:#o} is past 0777; give permission bits only",
            origin=_origin(path),
        )


def _check_directory(path: Path) -> None:
    directory = path.parent
    if not directory.is_dir():
        raise IoError(
            f"the directory {directory} does not exist; create it or mount the volume before "
            "rendering into it",
            origin=_origin(path),
        )


def _scratch_name(target: Path) -> Path:
    """A fresh scratch path beside ``target``; hidden, so directory watchers can skip it."""
    return target.with_name(
        f".{target.name}.{os.getpid()}.{time.time_ns():x}{next(_counter):x}.tmp"
    )


def _fsync_directory(directory: Path) -> None:
    # Makes the rename durable; some filesystems refuse a directory fsync, which only
    # weakens durability after a crash, never atomicity.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _open_scratch(target: Path, create_mode: int) -> tuple[int, Path]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(_SCRATCH_ATTEMPTS):
        scratch = _scratch_name(target)
        try:
            return os.open(scratch, flags, create_mode), scratch
        except FileExistsError:
            # Something (perhaps a planted symlink) holds this name; it is not ours to touch.
            continue
        except OSError as exc:
            raise IoError(
                f"cannot create a scratch file in {target.parent} ({exc.strerror}); the "
                "directory must be writable by this process",
                origin=_origin(target),
            ) from None
    raise IoError(
        f"every scratch name tried in {target.parent} already exists; remove stale "
        f".{target.name}.*.tmp files",
        origin=_origin(target),
    )


def _write_atomic(target: Path, data: bytes, mode: int | None) -> None:
    """Scratch in the same directory → write → chmod → fsync → rename → fsync directory."""
    # Without a mode the file gets what the umask gives, as a plain create would; with
    # one, the scratch is private until it carries its final mode.
    fd, scratch = _open_scratch(target, 0o600 if mode is not None else 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(scratch, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        if isinstance(exc, OSError):
            raise IoError(
                f"cannot write {target.name} ({exc.strerror}); the last published file is "
                "unchanged",
                origin=_origin(target),
            ) from None
        raise
    _fsync_directory(target.parent)


def _keep_history(target: Path, data: bytes, keep: int, now: int) -> Path | None:
    """Copy the generation about to be replaced into the history directory, then prune."""
    try:
        info = target.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IoError(
            f"cannot inspect {target.name} to keep its history ({exc.strerror})",
            origin=_origin(target),
        ) from None
    if not stat.S_ISREG(info.st_mode):
        return None
    try:
        previous = target.read_bytes()
    except OSError as exc:
        raise IoError(
            f"cannot read {target.name} to keep its history ({exc.strerror}); check its "
            "permissions or turn history off",
            origin=_origin(target),
        ) from None
    if previous == data:
        return None
    directory = history_dir(target)
    try:
        directory.mkdir(exist_ok=True)
    except OSError as exc:
        raise IoError(
            f"cannot create the history directory {directory.name} ({exc.strerror})",
            origin=_origin(target),
        ) from None
    short = hashlib.sha256(previous).hexdigest()[:12]
    entry = directory / f"{now}-{short}{target.suffix}"
    _write_atomic(entry, previous, stat.S_IMODE(info.st_mode))
    _prune_history(directory, keep)
    return entry


def _prune_history(directory: Path, keep: int) -> None:
    entries = sorted(
        child
        for child in directory.iterdir()
        if not child.name.startswith(".") and child.is_file() and not child.is_symlink()
    )
    for stale in entries[: max(0, len(entries) - keep)]:
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def write_meta(
    path: str | os.PathLike[str],
    fingerprint: str,
    meta: MetaInfo,
    *,
    mode: int | None = None,
) -> Path:
    """Write ``<dir>/.<name>.meta`` atomically, with the document's mode.

    The body is ``{"fingerprint", "revision", "rendered_at"}`` as 2-space-indented JSON
    with a trailing newline. It describes the render and never contains it.
    """
    target = Path(path)
    _check_mode(mode, target)
    rendered_at = meta.rendered_at if meta.rendered_at is not None else int(time.time())
    body = {"fingerprint": fingerprint, "revision": meta.revision, "rendered_at": rendered_at}
    destination = meta_path(target)
    _write_atomic(destination, (json.dumps(body, indent=2) + "\n").encode("utf-8"), mode)
    return destination


def publish_file(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int | None = None,
    history: int = 0,
    meta: MetaInfo | None = None,
    now: int | None = None,
) -> Published:
    """Atomically replace ``path`` with ``data``; keep history and write meta when asked.

    ``mode`` is applied to the scratch file before the rename (``None``: the umask's).
    ``history`` keeps that many replaced generations (0 = off, at most
    :data:`MAX_HISTORY`); an unchanged file adds no entry. ``meta`` writes the sibling meta
    file after the document. ``now`` (unix seconds) names the history entry and defaults
    the meta time. The parent directory must exist. Raises :class:`IoError` on a failed
    write, leaving the previous file in place.
    """
    target = Path(path)
    _check_mode(mode, target)
    if not 0 <= history <= MAX_HISTORY:
        raise BackendError(
            f"history keeps 0 to {MAX_HISTORY} generations, not {history}",
            origin=_origin(target),
        )
    _check_directory(target)
    stamp = now if now is not None else int(time.time())
    entry = _keep_history(target, data, history, stamp) if history else None
    _write_atomic(target, data, mode)
    fingerprint = digest(data)
    meta_file = None
    if meta is not None:
        if meta.rendered_at is None:
            meta = MetaInfo(revision=meta.revision, rendered_at=stamp)
        meta_file = write_meta(target, fingerprint, meta, mode=mode)
    return Published(
        path=target,
        fingerprint=fingerprint,
        size=len(data),
        history_entry=entry,
        meta_file=meta_file,
    )


def read_published(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes at ``path`` now, or ``None`` when nothing readable is there.

    A deleted file, a directory in its place or a permission error all answer ``None``:
    for a drift check, none of them is the file that was published.
    """
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def safe_child(base_dir: str | os.PathLike[str], name: str) -> Path:
    """``base_dir / name``, refusing any name that could land outside ``base_dir``.

    Refused: an empty name, an absolute name, any ``..`` segment, a NUL byte, and a name
    whose resolved location leaves the resolved base (through a symlink inside it).
    """
    base = Path(base_dir)
    origin = _origin(base)
    if not name or "\x00" in name:
        raise BackendError("a file name must be non-empty text without NUL bytes", origin=origin)
    relative = PurePosixPath(name)
    if not relative.parts:
        raise BackendError("a file name must name a file, not the volume itself", origin=origin)
    if relative.is_absolute() or name.startswith(("/", "\\")):
        raise BackendError(
            f"the file name `{name}` is absolute; name a file relative to the volume",
            origin=origin,
        )
    if ".." in relative.parts:
        raise BackendError(
            f"the file name `{name}` contains `..`; name a file inside the volume",
            origin=origin,
        )
    child = base.joinpath(*relative.parts)
    root = base.resolve()
    resolved = child.resolve()
    if resolved != root and root not in resolved.parents:
        raise BackendError(
            f"the file name `{name}` leads outside the volume through a symlink; name a "
            "file inside it",
            origin=origin,
        )
    return child
