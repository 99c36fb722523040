"""Where clones live, and how they are kept from growing.

One directory per (endpoint, credential identity) under the cache root, named by a hash so
neither the URL nor the username shows in the file system::

    <root>/<hash>/
        dynconf-git-cache   marker: only marked directories are ever emptied
        lock                flock'd for every operation (threads and processes alike)
        repo.git/           a bare object database; the one ref is refs/dynconf/head
        verdict             what the credential helper / ssh hooks saw during the last call
        ssh-mark            the hook script that writes the verdict for ssh

Growth is bounded by re-cloning: before a transfer, an object database holding more than
``max_packs`` packs or more than ``max_bytes`` bytes is emptied and initialised again, so
the transfer that follows is one shallow commit. Every fetch is ``--depth 1`` and keeps its
objects packed (``fetch.unpackLimit=1``), so the pack count is the number of transfers since
the last re-clone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from dynconf.errors import IoError, Origin

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PACKS",
    "MARKER",
    "CloneDir",
    "cache_root",
    "default_cache_root",
]

MARKER: Final = "dynconf-git-cache"
DEFAULT_MAX_PACKS: Final = 32
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
_SSH_MARK: Final = '#!/bin/sh\nprintf "%s\\n" "$1" >> "$DYNCONF_GIT_VERDICT"\n'


def default_cache_root() -> Path:
    """``$XDG_CACHE_HOME/dynconf/git``, else ``~/.cache/dynconf/git``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dynconf" / "git"


def cache_root(cache_dir: str | None, state_dir: str | None) -> Path:
    """Where clones live: the ``cache_dir`` setting, else ``<state_dir>/git`` (the directory
    the caller lends the store: the agent's is on the rendered volume), else
    :func:`default_cache_root` (a user's own cache, for the CLI and the library)."""
    if cache_dir:
        return Path(cache_dir)
    if state_dir:
        return Path(state_dir) / "git"
    return default_cache_root()


class CloneDir:
    """The per-(endpoint, identity) directory; created 0700 on first use, never at build."""

    def __init__(self, root: Path, endpoint: str, identity: str) -> None:
        name = hashlib.sha256(f"{endpoint}\0{identity}".encode()).hexdigest()[:32]
        self.path = root / name
        self.repo = self.path / "repo.git"
        self.verdict = self.path / "verdict"
        self.ssh_mark = self.path / "ssh-mark"
        self._lock = self.path / "lock"

    def prepare(self) -> None:
        """Create the directory, its marker and hook script (the repository is made by git).

        Raises :class:`IoError` naming the directory and the fix when it cannot be written
        (a read-only root file system, a home directory that is not the process's).
        """
        try:
            self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.path, 0o700)
            marker = self.path / MARKER
            if not marker.exists():
                marker.write_text("owned by dynconf-store-git; safe to delete\n")
            if not self.ssh_mark.exists() or self.ssh_mark.read_text() != _SSH_MARK:
                self.ssh_mark.write_text(_SSH_MARK)
                os.chmod(self.ssh_mark, 0o700)
        except OSError as exc:
            raise self.unusable(exc) from None

    def unusable(self, exc: OSError) -> IoError:
        """The refusal for a cache directory the process cannot write."""
        return IoError(
            f"the git clone cache {self.path.parent} cannot be written ({exc.strerror}); set "
            "the cache_dir setting to a directory this process can write (the agent keeps "
            "it on the rendered volume)",
            origin=Origin.file(str(self.path.parent)),
        )

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory for one operation (flock: per open file, so threads exclude)."""
        self.prepare()
        try:
            handle = self._lock.open("a")
        except OSError as exc:
            raise self.unusable(exc) from None
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def pack_count(self) -> int:
        return len(list((self.repo / "objects" / "pack").glob("*.pack")))

    def object_bytes(self) -> int:
        total = 0
        for dirpath, _dirs, files in os.walk(self.repo / "objects"):
            for name in files:
                with contextlib.suppress(OSError):
                    total += (Path(dirpath) / name).stat().st_size
        return total

    def over_ceiling(self, max_packs: int, max_bytes: int) -> bool:
        if not self.repo.exists():
            return False
        if max_packs > 0 and self.pack_count() > max_packs:
            return True
        return max_bytes > 0 and self.object_bytes() > max_bytes

    def empty(self) -> None:
        """Drop the object database (only in a directory this package marked as its own)."""
        if (self.path / MARKER).is_file() and self.repo.exists():
            try:
                shutil.rmtree(self.repo)
            except OSError as exc:
                raise self.unusable(exc) from None

    def read_verdict(self) -> set[str]:
        try:
            return set(self.verdict.read_text().split())
        except FileNotFoundError:
            return set()

    def clear_verdict(self) -> None:
        try:
            self.verdict.write_text("")
        except OSError as exc:
            raise self.unusable(exc) from None
