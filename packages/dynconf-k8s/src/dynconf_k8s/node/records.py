"""What the node agent remembers about each published volume, so a restart loses none.

The kubelet publishes an inline volume once and never asks again while the pod lives, so a
node agent that restarts must find its volumes itself. Each publish writes one small record
— the target, the volume attributes and the Secret values the kubelet passed — into the
state directory (by default ``volumes/`` beside the CSI socket, inside the kubelet's plugin
directory, which the DaemonSet already mounts from the host); unpublish deletes it. At start
every record whose target is still on disk is claimed again and its document watched; a
record whose target the kubelet has removed meanwhile is dropped.

The records hold credentials, so they live in a directory only root can enter (0700), each
file 0600, written atomically; they are never placed inside the target, where the pod would
read them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from dynconf.publish import publish_file

__all__ = ["Record", "RecordStore"]

log = logging.getLogger("dynconf_k8s.node")


@dataclass(frozen=True)
class Record:
    """One published volume as the kubelet described it."""

    volume_id: str
    target: str
    attributes: dict[str, str]
    secrets: dict[str, str]

    def __repr__(self) -> str:
        return f"Record(volume_id={self.volume_id!r}, target={self.target!r})"


class RecordStore:
    """A directory of per-volume records, one JSON file each, named by the target's digest."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, target: str | os.PathLike[str]) -> Path:
        name = hashlib.sha256(str(target).encode()).hexdigest()[:32]
        return self.directory / f"{name}.json"

    def save(
        self,
        volume_id: str,
        target: str | os.PathLike[str],
        attributes: Mapping[str, str],
        secrets: Mapping[str, str],
    ) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        body = {
            "volume_id": volume_id,
            "target": str(target),
            "attributes": dict(attributes),
            "secrets": dict(secrets),
        }
        publish_file(self._path(target), json.dumps(body, sort_keys=True).encode(), mode=0o600)

    def remove(self, target: str | os.PathLike[str]) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(target).unlink()

    def load(self) -> Iterator[Record]:
        """Every readable record; an unreadable one is logged and skipped, never fatal."""
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob("*.json")):
            try:
                body = json.loads(path.read_text())
                yield Record(
                    volume_id=str(body["volume_id"]),
                    target=str(body["target"]),
                    attributes={str(k): str(v) for k, v in body["attributes"].items()},
                    secrets={str(k): str(v) for k, v in body["secrets"].items()},
                )
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
                log.warning(
                    "record_unreadable", extra={"file": str(path), "error": type(error).__name__}
                )
