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
from enum import StrEnum
from pathlib import Path
from typing import Final

from dynconf.document import Document, deep_copy, fingerprint, leaf_paths, split_path
from dynconf.errors import BackendError, DynconfError, Origin
from dynconf.plugins import default_registry
from dynconf.publish import publish_file

__all__ = ["CACHE_FILE_MODE", "CACHE_MARKER", "CacheMode", "LastKnownGood"]

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
            kept = deep_copy(section)
            if self.mode is CacheMode.REDACTED:
                for path in sorted(self.secrets, key=len, reverse=True):
                    _drop(kept, path)
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
        cached = document.get("cached")
        if not isinstance(cached, dict):
            return None
        marker = cached.get(CACHE_MARKER)
        if not isinstance(marker, dict) or marker.get("version") != CACHE_VERSION:
            return None
        return cached

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
        cached = self._read()
        if cached is None or cached[CACHE_MARKER].get("mode") != CacheMode.FINGERPRINT.value:
            return None
        before = set(cached.get("keys") or [])
        after = set(leaf_paths(section))
        gone, new = sorted(before - after), sorted(after - before)
        if gone or new:
            parts = [f"{', '.join(gone)} is gone" if gone else "", f"{', '.join(new)} is new"]
            return "; ".join(part for part in parts if part)
        if cached.get("fingerprint") != fingerprint(section):
            return "the same keys, with different values"
        return "nothing moved since the cached fingerprint"
