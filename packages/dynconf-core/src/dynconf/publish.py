"""Publishing: put rendered bytes on disk so a reader only ever sees a whole file.

Every write goes to a scratch file in the target's own directory (same filesystem, so the
rename is atomic), created exclusively without following a planted symlink, written,
given its final mode, fsynced, then renamed over the target; the directory is fsynced
after, best effort. A failure removes the scratch file and leaves the previous file in
place — the last good file keeps serving.

Every write, read and delete is relative to a directory file descriptor. The *root* is a
directory the caller trusts (the volume a node agent serves, or, without one, the output's
own directory — the sidecar's mount point); it is opened afresh for each operation, and
every component below it is walked with ``O_NOFOLLOW | O_DIRECTORY`` (``openat`` /
``mkdirat`` / ``renameat`` / ``unlinkat`` through ``dir_fd=``). Whoever can write inside the
root (a tenant's pod writing its own volume) may swap a directory, the file, its meta file
or its history directory for a symlink at any moment; the swap is then refused with one
line naming the component, and nothing outside the root is written, read or deleted. This
module is the one place that does it: the sidecar agent, the node agent and ``dynconf
render`` all publish through it.

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
import errno
import hashlib
import itertools
import json
import os
import stat
import time
from collections.abc import Iterator
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
    "remove_published_file",
    "safe_child",
    "write_meta",
]

MAX_HISTORY: Final = 10
"""Most generations history keeps; every kept copy is charged to the volume's memory."""

_SCRATCH_ATTEMPTS: Final = 16
_DIRECTORY_MODE: Final = 0o755
_counter = itertools.count()

_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_WALK_FLAGS: Final = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0)
"""Reading a published file: never through a symlink, never blocked on a planted FIFO."""


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


def _meta_name(name: str) -> str:
    return f".{name}.meta"


def _history_name(name: str) -> str:
    return f".{name}.history"


def meta_path(path: str | os.PathLike[str]) -> Path:
    """``<dir>/.<name>.meta`` for a published file."""
    target = Path(path)
    return target.with_name(_meta_name(target.name))


def history_dir(path: str | os.PathLike[str]) -> Path:
    """``<dir>/.<name>.history`` for a published file."""
    target = Path(path)
    return target.with_name(_history_name(target.name))


def _origin(path: Path) -> Origin:
    return Origin.file(str(path))


def _check_mode(mode: int | None, path: Path) -> None:
    if mode is not None and not 0 <= mode <= 0o777:
        raise BackendError(
            f"the file mode {mode:#o} is past 0777; give permission bits only",
            origin=_origin(path),
        )


# -- the walk: one trusted root, every component below it without following a symlink ---


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a file lives: the trusted root, the directories below it, the file's name."""

    path: Path
    root: Path
    parts: tuple[str, ...]
    name: str


def _place(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> _Place:
    target = Path(path)
    if root is None:
        return _Place(target, target.parent, (), target.name)
    base = Path(root)
    try:
        relative = target.relative_to(base)
    except ValueError:
        raise BackendError(
            f"{target} is not inside {base}; publish only inside the volume",
            origin=_origin(target),
        ) from None
    parts = relative.parts
    if not parts or any(part in ("", ".", "..") for part in parts):
        raise BackendError(
            f"{target} does not name a file inside {base}; name a file inside the volume",
            origin=_origin(target),
        )
    return _Place(target, base, parts[:-1], parts[-1])


def _refused(place: _Place, component: str, exc: OSError) -> IoError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return IoError(
            f"`{component}` under {place.root} is a symlink or not a directory; refusing to "
            f"follow it to write {place.name} (the last published file is unchanged) — "
            "remove it from the volume",
            origin=_origin(place.path),
        )
    return IoError(
        f"cannot open `{component}` under {place.root} ({exc.strerror}); the last "
        "published file is unchanged",
        origin=_origin(place.path),
    )


@contextlib.contextmanager
def _directory(place: _Place, *, create: bool) -> Iterator[int]:
    """A descriptor on the file's directory, reached from the root without any symlink.

    The root itself is the caller's to trust (its path is opened as given); each component
    below it is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to the previous one, and,
    with ``create``, made first (``mkdir`` relative to its parent's descriptor).
    """
    try:
        fd = os.open(place.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except FileNotFoundError:
        raise IoError(
            f"the directory {place.root} does not exist; create it or mount the volume before "
            "rendering into it",
            origin=_origin(place.path),
        ) from None
    except OSError as exc:
        raise _refused(place, str(place.root), exc) from None
    try:
        for part in place.parts:
            if create:
                try:
                    os.mkdir(part, _DIRECTORY_MODE, dir_fd=fd)
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise _refused(place, part, exc) from None
            try:
                child = os.open(part, _WALK_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise IoError(
                    f"the directory `{part}` under {place.root} does not exist",
                    origin=_origin(place.path),
                ) from None
            except OSError as exc:
                raise _refused(place, part, exc) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _subdirectory(place: _Place, parent: int, name: str) -> int:
    """Make (if missing) and open ``name`` inside ``parent``, never through a symlink."""
    try:
        os.mkdir(name, _DIRECTORY_MODE, dir_fd=parent)
    except FileExistsError:
        pass
    except OSError as exc:
        raise IoError(
            f"cannot create the directory {name} ({exc.strerror})", origin=_origin(place.path)
        ) from None
    try:
        return os.open(name, _WALK_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _refused(place, name, exc) from None


def _read_at(directory: int, name: str) -> tuple[bytes, int] | None:
    """The bytes and mode of the regular file ``name``; ``None`` for anything else."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=directory)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), stat.S_IMODE(info.st_mode)
    finally:
        os.close(fd)


def _fsync(fd: int) -> None:
    # Makes the rename durable; some filesystems refuse a directory fsync, which only
    # weakens durability after a crash, never atomicity.
    with contextlib.suppress(OSError):
        os.fsync(fd)


# -- the atomic write -----------------------------------------------------------------------


def _scratch_name(name: str) -> str:
    """A fresh scratch name beside ``name``; hidden, so directory watchers can skip it."""
    return f".{name}.{os.getpid()}.{time.time_ns():x}{next(_counter):x}.tmp"


def _open_scratch(place: _Place, directory: int, name: str, create_mode: int) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC | _NOFOLLOW
    for _ in range(_SCRATCH_ATTEMPTS):
        scratch = _scratch_name(name)
        try:
            return os.open(scratch, flags, create_mode, dir_fd=directory), scratch
        except FileExistsError:
            # Something (perhaps a planted symlink) holds this name; it is not ours to touch.
            continue
        except OSError as exc:
            raise IoError(
                f"cannot create a scratch file beside {name} ({exc.strerror}); the "
                "directory must be writable by this process",
                origin=_origin(place.path),
            ) from None
    raise IoError(
        f"every scratch name tried beside {name} already exists; remove stale .{name}.*.tmp files",
        origin=_origin(place.path),
    )


def _write_at(place: _Place, directory: int, name: str, data: bytes, mode: int | None) -> None:
    """Scratch in ``directory`` → write → chmod → fsync → rename → fsync the directory."""
    # Without a mode the file gets what the umask gives, as a plain create would; with
    # one, the scratch is private until it carries its final mode.
    fd, scratch = _open_scratch(place, directory, name, 0o600 if mode is not None else 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        # renameat: a symlink (or anything) at ``name`` is replaced, never followed
        os.replace(scratch, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(scratch, dir_fd=directory)
        if isinstance(exc, OSError):
            raise IoError(
                f"cannot write {name} ({exc.strerror}); the last published file is unchanged",
                origin=_origin(place.path),
            ) from None
        raise
    _fsync(directory)


def _keep_history(place: _Place, directory: int, data: bytes, keep: int, now: int) -> Path | None:
    """Copy the generation about to be replaced into the history directory, then prune."""
    previous = _read_at(directory, place.name)
    if previous is None or previous[0] == data:
        return None
    body, mode = previous
    entry = f"{now}-{hashlib.sha256(body).hexdigest()[:12]}{PurePosixPath(place.name).suffix}"
    history = _subdirectory(place, directory, _history_name(place.name))
    try:
        _write_at(place, history, entry, body, mode)
        _prune_history(history, keep)
    finally:
        os.close(history)
    return history_dir(place.path) / entry


def _prune_history(directory: int, keep: int) -> None:
    entries = []
    for name in os.listdir(directory):
        if name.startswith("."):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode):
                entries.append(name)
    for stale in sorted(entries)[: max(0, len(entries) - keep)]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale, dir_fd=directory)


def _meta_body(fingerprint: str, meta: MetaInfo) -> bytes:
    rendered_at = meta.rendered_at if meta.rendered_at is not None else int(time.time())
    body = {"fingerprint": fingerprint, "revision": meta.revision, "rendered_at": rendered_at}
    return (json.dumps(body, indent=2) + "\n").encode("utf-8")


def write_meta(
    path: str | os.PathLike[str],
    fingerprint: str,
    meta: MetaInfo,
    *,
    mode: int | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Path:
    """Write ``<dir>/.<name>.meta`` atomically, with the document's mode.

    The body is ``{"fingerprint", "revision", "rendered_at"}`` as 2-space-indented JSON
    with a trailing newline. It describes the render and never contains it. ``root`` is
    as for :func:`publish_file`.
    """
    place = _place(path, root)
    _check_mode(mode, place.path)
    with _directory(place, create=False) as directory:
        _write_at(place, directory, _meta_name(place.name), _meta_body(fingerprint, meta), mode)
    return meta_path(place.path)


def publish_file(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int | None = None,
    history: int = 0,
    meta: MetaInfo | None = None,
    now: int | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Published:
    """Atomically replace ``path`` with ``data``; keep history and write meta when asked.

    ``mode`` is applied to the scratch file before the rename (``None``: the umask's).
    ``history`` keeps that many replaced generations (0 = off, at most
    :data:`MAX_HISTORY`); an unchanged file adds no entry. ``meta`` writes the sibling meta
    file after the document. ``now`` (unix seconds) names the history entry and defaults
    the meta time.

    ``root`` is the trusted directory ``path`` lies under (a volume): the directories
    between them are created as needed and walked without following a symlink. Without
    it, the root is ``path``'s own directory, which must exist. Raises :class:`IoError` on
    a failed write or a symlinked component, leaving the previous file in place.
    """
    place = _place(path, root)
    _check_mode(mode, place.path)
    if not 0 <= history <= MAX_HISTORY:
        raise BackendError(
            f"history keeps 0 to {MAX_HISTORY} generations, not {history}",
            origin=_origin(place.path),
        )
    stamp = now if now is not None else int(time.time())
    fingerprint = digest(data)
    meta_file = None
    with _directory(place, create=root is not None) as directory:
        entry = _keep_history(place, directory, data, history, stamp) if history else None
        _write_at(place, directory, place.name, data, mode)
        if meta is not None:
            if meta.rendered_at is None:
                meta = MetaInfo(revision=meta.revision, rendered_at=stamp)
            body = _meta_body(fingerprint, meta)
            _write_at(place, directory, _meta_name(place.name), body, mode)
            meta_file = meta_path(place.path)
    return Published(
        path=place.path,
        fingerprint=fingerprint,
        size=len(data),
        history_entry=entry,
        meta_file=meta_file,
    )


def read_published(
    path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
) -> bytes | None:
    """The bytes at ``path`` now, or ``None`` when nothing readable is there.

    A deleted file, a directory, a symlink (the file's or a directory's on the way from
    ``root``) or a permission error all answer ``None``: for a drift check, none of them is
    the file that was published.
    """
    try:
        place = _place(path, root)
        with _directory(place, create=False) as directory:
            found = _read_at(directory, place.name)
    except (OSError, IoError, BackendError):
        return None
    return found[0] if found is not None else None


def remove_published_file(path: str | os.PathLike[str], *, root: str | os.PathLike[str]) -> None:
    """Delete a file published under ``root``, its scratch, meta and history, and the
    directories between them once empty — never through a symlink.

    The directories are walked as for :func:`publish_file`; a component that has become a
    symlink (or vanished) ends the walk there and nothing past it is deleted. Unlinking the
    file's own name removes whatever is at that name inside the volume (a symlink itself,
    never its target). What this never wrote is left alone.
    """
    place = _place(path, root)
    try:
        base = os.open(place.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError:
        return
    chain = [base]
    try:
        for part in place.parts:
            try:
                chain.append(os.open(part, _WALK_FLAGS, dir_fd=chain[-1]))
            except OSError:
                return  # gone, or swapped for a symlink: nothing of ours is past it
        directory = chain[-1]
        for name in (place.name, _meta_name(place.name)):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(name, dir_fd=directory)
        _remove_history(directory, _history_name(place.name))
        with contextlib.suppress(OSError):
            for name in os.listdir(directory):
                if name.startswith(f".{place.name}.") and name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=directory)
        for index in range(len(place.parts) - 1, -1, -1):
            try:
                os.rmdir(place.parts[index], dir_fd=chain[index])
            except OSError:
                break  # not empty (or not ours): it and everything above it stay
    finally:
        for fd in chain:
            os.close(fd)


def _remove_history(directory: int, name: str) -> None:
    try:
        history = os.open(name, _WALK_FLAGS, dir_fd=directory)
    except OSError:
        return
    try:
        for entry in os.listdir(history):
            with contextlib.suppress(OSError):
                os.unlink(entry, dir_fd=history)
    finally:
        os.close(history)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=directory)


def safe_child(base_dir: str | os.PathLike[str], name: str) -> Path:
    """``base_dir / name``, refusing any name that could land outside ``base_dir``.

    Refused: an empty name, an absolute name, any ``..`` segment, a NUL byte, and a name
    whose resolved location leaves the resolved base (through a symlink inside it). This
    is the early, by-name check; the writes themselves never follow a symlink (see
    :func:`publish_file` with ``root``), so a symlink planted after it changes nothing.
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
