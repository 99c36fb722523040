"""Trust-material rotation: notice that a mounted CA, certificate, key or ssh key moved.

Store clients read their trust material once, when built; the kubelet rewrites a mounted
ConfigMap or Secret in place and tells nobody. The agent fingerprints the files every interval
and rebuilds the client when the fingerprint moves — confirmed by a second read a quarter second
later, because a rotation writes several files and a client built from a half-written pair
fails as if the certificate were bad.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = ["CONFIRM_DELAY", "fingerprint"]

CONFIRM_DELAY: Final = 0.25


def fingerprint(paths: Sequence[str]) -> str:
    """sha256 over each path and ``present`` + its bytes, or ``absent``."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.encode("utf-8"))
        try:
            data = Path(path).read_bytes()
        except OSError:
            digest.update(b"absent")
            continue
        digest.update(b"present")
        digest.update(data)
    return digest.hexdigest()
