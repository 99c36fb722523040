"""``--canary``: publish a new document to some of the fleet before all of it.

The cohort is the pod's own name hashed into a bucket 0-99, so it is deterministic and stable as
the percentage widens, with no coordination between agents. The percentage is a mounted file
(the kubelet rewrites it in place, so widening needs no restart) re-read at every decision.
0 holds everybody, 100 holds nobody, and a file that is missing or does not parse is no canary at
all — a typo must not freeze the fleet on its current document.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["Canary", "bucket", "read_percent"]


def bucket(pod_name: str) -> int:
    """The first two bytes of sha256(pod name), big-endian, modulo 100."""
    head = hashlib.sha256(pod_name.encode("utf-8")).digest()[:2]
    return int.from_bytes(head, "big") % 100


def read_percent(path: Path) -> int | None:
    """The trimmed integer in ``path`` clamped to 100, or ``None`` (unreadable, garbage)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    if value < 0:
        return None
    return min(value, 100)


class Canary:
    """This pod's bucket and the percentage file; answers "may I publish now?"."""

    def __init__(self, path: Path | None, pod_name: str) -> None:
        self.path = path
        self.bucket = bucket(pod_name)
        self.percent: int = 100
        """The number last read (100 when there is no canary), for ``canary_percent``."""

    def admits(self) -> bool:
        """Re-read the file; admitted iff there is no canary or the bucket is below it."""
        if self.path is None:
            self.percent = 100
            return True
        percent = read_percent(self.path)
        if percent is None:
            self.percent = 100
            return True
        self.percent = percent
        return self.bucket < percent
