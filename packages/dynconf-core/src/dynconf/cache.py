"""Last-known-good on disk: what a restart starts from while its sources cannot load.

The cache is rewritten after every install that came from the sources (``init``, a reload,
a watch) and read only when a cold start fails, never on a failed reload (a running
process already has its last good snapshot in memory). It is written through
:func:`dynconf.publish.publish_file` — a same-directory scratch file, mode 0600, fsynced,
renamed — so a crash mid-write leaves the previous cache whole.

The file's format comes from its extension, and its document is::

    {"cached": {...the section..., "__dynamic_config_cache": {"version": 1, "mode": "<mode>"}}}

Three modes:

* ``redacted`` (the default) drops every secret path before writing; a recovery then needs
  the secrets from the environment layers, which still sit above the cache;
* ``full`` writes the section as installed, secrets included (the file is 0600);
* ``fingerprint`` stores ``{"fingerprint": ..., "keys": [leaf paths]}`` and no value, so it
  never recovers; it says on the next good start whether the configuration drifted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from dynconf.diagnostics import Change, changed_paths
from dynconf.document import Document, deep_copy, fingerprint, leaf_paths, split_path
from dynconf.errors import BackendError, DynconfError, IoError, MissingError, Origin
from dynconf.plugins import default_registry
from dynconf.publish import publish_file

__all__ = ["CACHE_FILE_MODE", "CACHE_MARKER", "CacheDrift", "CacheMode", "LastKnownGood", "Stored"]

CACHE_MARKER: Final = "__dynamic_config_cache"
CACHE_VERSION: Final = 1
CACHE_FILE_MODE: Final = 0o600
"""The cache may hold secrets (``full``); nobody but the owner reads it."""

log = logging.getLogger("dynconf.engine")


class CacheMode(StrEnum):
    REDACTED = "redacted"
    FULL = "full"
    FINGERPRINT = "fingerprint"

    @classmethod
    def _missing_(cls, value: object) -> CacheMode:
        names = ", ".join(repr(member.value) for member in cls)
        raise ValueError(f"{value!r} is not a cache mode; use one of {names}")


@dataclass(frozen=True, slots=True)
class Stored:
    """What a cache file holds: its mode, the section (``None`` for a fingerprint cache),
    and, for a fingerprint cache, the leaf paths and the fingerprint it recorded."""

    mode: CacheMode
    section: Document | None
    keys: tuple[str, ...] = ()
    fingerprint: str = ""


@dataclass(frozen=True, slots=True)
class CacheDrift:
    """How a section differs from what the cache holds, as the cache can tell it.

    ``changes`` are leaf paths (never values). A redacted cache compares every path but
    the secret ones; a fingerprint cache knows paths only, so a value that moved under an
    unchanged key set is ``values_moved`` with no path to name.
    """

    mode: CacheMode
    changes: tuple[Change, ...]
    values_moved: bool = False

    @property
    def same(self) -> bool:
        return not self.changes and not self.values_moved


def _drop(document: Document, path: str) -> None:
    segments = split_path(path)
    node: object = document
    for segment in segments[:-1]:
        node = node.get(segment) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(segments[-1], None)


class LastKnownGood:
    """One configuration's cache file; built by :meth:`DynamicConfig.cache`."""

    def __init__(self, path: str | Path, mode: CacheMode | str, secrets: frozenset[str]) -> None:
        self.path = Path(path)
        self.mode = CacheMode(mode)
        self.secrets = secrets
        origin = Origin.file(str(self.path))
        if self.path.suffix == ".age":
            raise BackendError(
                "a cache file cannot be age-encrypted; name it .json, .toml or .yaml",
                origin=origin,
            )
        self.format = default_registry().format_for_path(self.path)
        if self.format.dump is None or self.format.flat:
            raise BackendError(
                f"the cache cannot be written as {self.format.name}, which cannot hold a "
                "typed document; name it .json, .toml or .yaml",
                origin=origin,
            )

    def body(self, section: Document) -> Document:
        marker = {"version": CACHE_VERSION, "mode": self.mode.value}
        if self.mode is CacheMode.FINGERPRINT:
            kept: Document = {"fingerprint": fingerprint(section), "keys": leaf_paths(section)}
        else:
            kept = self.visible(section)
        kept[CACHE_MARKER] = marker
        return {"cached": kept}

    def write(self, section: Document) -> None:
        """Replace the cache with ``section``; a failure is logged, never raised."""
        assert self.format.dump is not None
        try:
            text = self.format.dump(self.body(section))
            publish_file(self.path, text.encode("utf-8"), mode=CACHE_FILE_MODE)
        except DynconfError as error:
            log.warning(
                "config_cache_write_failed",
                extra={"cache": str(self.path), "kind": error.kind.value, "path": error.path},
            )
        except OSError as error:
            log.warning(
                "config_cache_write_failed",
                extra={"cache": str(self.path), "kind": "io", "error": type(error).__name__},
            )

    def _read(self) -> Document | None:
        try:
            text = self.path.read_text(encoding="utf-8")
            document = self.format.parse(text, Origin.file(str(self.path)))
        except (OSError, UnicodeDecodeError, DynconfError):
            return None
        return self._cached(document)

    @staticmethod
    def _cached(document: Document) -> Document | None:
        cached = document.get("cached")
        if not isinstance(cached, dict):
            return None
        marker = cached.get(CACHE_MARKER)
        if not isinstance(marker, dict) or marker.get("version") != CACHE_VERSION:
            return None
        return cached

    def stored(self) -> Stored:
        """The cache file as written, for a reader outside the process (``dynconf diff``).

        Unlike the start-up path, which falls back quietly, this raises: a missing file is
        a :class:`~dynconf.errors.MissingError`, anything else that is not a cache of this
        version a :class:`~dynconf.errors.BackendError`; neither message holds a value.
        """
        origin = Origin.file(str(self.path))
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MissingError(
                f"the snapshot file {self.path} does not exist; the process writes it after "
                "its first install when built with cache(path, mode): name that path",
                origin=origin,
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or type(error).__name__
            raise IoError(
                f"the snapshot file {self.path} cannot be read ({reason}); run as the "
                "service's user or check the path",
                origin=origin,
            ) from None
        cached = self._cached(self.format.parse(text, origin))
        if cached is None:
            raise BackendError(
                f"{self.path} is not a dynconf cache file (version {CACHE_VERSION}); name "
                "the file the process's cache(path, mode) writes",
                origin=origin,
            )
        try:
            mode = CacheMode(cached[CACHE_MARKER].get("mode"))
        except ValueError:
            raise BackendError(
                f"{self.path} names no known cache mode; let the process rewrite it",
                origin=origin,
            ) from None
        if mode is CacheMode.FINGERPRINT:
            keys = cached.get("keys")
            return Stored(
                mode,
                None,
                tuple(str(k) for k in keys) if isinstance(keys, list) else (),
                str(cached.get("fingerprint") or ""),
            )
        section = dict(cached)
        del section[CACHE_MARKER]
        return Stored(mode, section)

    def compare(self, stored: Stored, section: Document) -> CacheDrift:
        """How ``section`` (a fresh load) differs from ``stored``, seen through the stored
        mode: a redacted cache is compared with ``section`` redacted the same way."""
        if stored.section is None:
            before, after = set(stored.keys), set(leaf_paths(section))
            changes = [Change(path, "removed") for path in before - after]
            changes += [Change(path, "added") for path in after - before]
            changes.sort(key=lambda change: change.path)
            moved = not changes and stored.fingerprint != fingerprint(section)
            return CacheDrift(stored.mode, tuple(changes), moved)
        fresh = self.visible(section, stored.mode)
        return CacheDrift(stored.mode, tuple(changed_paths(stored.section, fresh)))

    def visible(self, section: Document, mode: CacheMode | None = None) -> Document:
        """``section`` as a cache of ``mode`` (default: this cache's) would keep it."""
        kept: Document = deep_copy(section)
        if (mode or self.mode) is CacheMode.REDACTED:
            for path in sorted(self.secrets, key=len, reverse=True):
                _drop(kept, path)
        return kept

    def recoverable(self) -> Document | None:
        """The cached section to start from, or ``None`` (no file, unreadable, or a
        fingerprint cache, which holds no values)."""
        cached = self._read()
        if cached is None or cached[CACHE_MARKER].get("mode") == CacheMode.FINGERPRINT.value:
            return None
        section = dict(cached)
        del section[CACHE_MARKER]
        return section

    def drift(self, section: Document) -> str | None:
        """For a fingerprint cache: one line saying how ``section`` differs from the cached
        fingerprint (paths only), or ``None`` when there is nothing to compare."""
        try:
            stored = self.stored()
        except DynconfError:
            return None
        if stored.mode is not CacheMode.FINGERPRINT:
            return None
        drift = self.compare(stored, section)
        gone = [c.path for c in drift.changes if c.kind == "removed"]
        new = [c.path for c in drift.changes if c.kind == "added"]
        if gone or new:
            parts = [f"{', '.join(gone)} is gone" if gone else "", f"{', '.join(new)} is new"]
            return "; ".join(part for part in parts if part)
        if drift.values_moved:
            return "the same keys, with different values"
        return "nothing moved since the cached fingerprint"
