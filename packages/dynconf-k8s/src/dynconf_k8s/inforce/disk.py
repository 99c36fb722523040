"""The mounted installation document, watched on disk.

The kubelet updates a ConfigMap volume by writing a new timestamped directory and swapping the
``..data`` symlink the visible file points through, so the path's resolved target (and its
inode and mtime) change in one step, never a half-written file. Like the serving pair's
reloader (:mod:`dynconf_k8s.webhook.tls`) this polls: every few seconds it compares the
resolved target, inode, size and mtime with what it last read, and offers the new text to the
:class:`~dynconf_k8s.inforce.holder.InstallationInForce` only when they differ.

A document that disappears is not an edit (a ConfigMap volume keeps its last files when the
ConfigMap is deleted; a vanished file is an accident more often than a wish): the last good
installation stays and one line says so. To clear the document, write an empty one.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Final

from dynconf_k8s.inforce.holder import InstallationInForce, Offer

__all__ = ["POLL_SECONDS", "DocumentWatch"]

log = logging.getLogger("dynconf_k8s.inforce")

POLL_SECONDS: Final = 5.0

_Seen = tuple[str, int, int, int]


def _seen(path: str) -> _Seen | None:
    try:
        target = os.path.realpath(path)
        st = os.stat(target)
    except OSError:
        return None
    return (target, st.st_ino, st.st_size, st.st_mtime_ns)


class DocumentWatch:
    """Offers the document at ``path`` to ``holder`` each time it changes on disk.

    The version read at start is the holder's first installation, so construction records
    what is on disk now and offers nothing.
    """

    def __init__(self, path: str, holder: InstallationInForce, every: float = POLL_SECONDS) -> None:
        self.path = path
        self.holder = holder
        self.every = every
        self._seen = _seen(path)
        self._missing_logged = False

    def check(self) -> Offer | None:
        """Offer the document if it changed since the last check; the offer, or ``None``."""
        seen = _seen(self.path)
        if seen is None:
            if self._seen is not None and not self._missing_logged:
                log.warning(
                    "installation_document_missing",
                    extra={"path": self.path, "fix": "write an empty document to clear it"},
                )
                self._missing_logged = True
            return None
        self._missing_logged = False
        if seen == self._seen:
            return None
        try:
            with open(seen[0], encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            log.warning(
                "installation_document_unreadable",
                extra={"path": self.path, "error_type": type(exc).__name__},
            )
            return None
        self._seen = seen
        return self.holder.offer(text, origin=self.path)

    def run(self, stop: threading.Event) -> None:
        """Check every ``every`` seconds until ``stop`` is set."""
        while not stop.wait(self.every):
            self.check()
