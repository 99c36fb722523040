"""What the sidecar does next, as one pure function of what it knows (level-based).

The agent's loop observes; this module decides. :func:`decide` reads the whole situation —
the newest document the store gave (prepared, absent, or none yet), what this agent last
published, what the files hold now, the policies and the canary — and answers with one
:class:`Action`. It keeps no state and performs nothing, like a controller's reconcile: the
runner (:mod:`dynconf_k8s.agent.loop`) calls it after every delivery and every tick and
carries the action out, so a publish that failed is simply decided again at the next tick.

The table it implements (``tests/agent/test_decide.py`` enumerates every combination):

============  ==========================  ===========================================
latest        situation                   action
============  ==========================  ===========================================
none/absent   starting, nothing published startup policy: ``require-fresh`` FAIL;
                                          ``allow-cached`` NOTHING over a non-empty
                                          file, else FAIL; ``best-effort`` EMPTY
                                          where a file is missing, else NOTHING
none/absent   later, nothing published    NOTHING (wait for the document)
none          published before            drift as below
absent        published before            on-delete ``fail`` FAIL; drifted files as
                                          below (a ``remove`` repair is EMPTY);
                                          ``remove`` EMPTY unless already empty;
                                          ``retain`` NOTHING
document      same bytes as published     files drifted: on-drift ``fail`` FAIL,
                                          ``repair`` REPAIR, ``warn`` NOTHING
document      new                         canary holds it (never the first publish):
                                          HOLD; else PUBLISH
============  ==========================  ===========================================

``require-ack`` is not an input: it gates readiness on the application's acknowledgement,
never what is written.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dynconf.pipeline import Prepared, RenderRequest
from dynconf.publish import read_published
from dynconf.stores import Absent

__all__ = [
    "Action",
    "Decision",
    "Disk",
    "Latest",
    "Policy",
    "decide",
    "DriftCheck",
    "drifted_files",
    "latest_kind",
    "recorded_disk",
    "startup_disk",
]


class Latest(enum.Enum):
    """What the store last said."""

    NONE = "none"
    """The store has not answered since the agent started."""
    ABSENT = "absent"
    """The document is not in the store."""
    SAME = "same"
    """A document whose rendered bytes equal what this agent last published."""
    NEW = "new"
    """A document whose rendered bytes differ from what was last published (or nothing was)."""


class Disk(enum.Enum):
    """What the output files hold, compared with what this agent last wrote."""

    OURS = "ours"
    """Exactly what this agent wrote (or it wrote nothing and nothing needs checking)."""
    DRIFTED = "drifted"
    """Something else changed them."""
    EMPTY = "empty"
    """The empty documents on-delete ``remove`` (or ``best-effort``) wrote."""
    CACHED = "cached"
    """Nothing written by this agent yet, and a non-empty file from an earlier run is there."""
    MISSING = "missing"
    """Nothing written by this agent yet, and nothing usable there."""


class Action(enum.Enum):
    PUBLISH = "publish"
    HOLD = "hold"
    REPAIR = "repair"
    EMPTY = "empty"
    FAIL = "fail"
    NOTHING = "nothing"


@dataclass(frozen=True, slots=True)
class Policy:
    """The agent's flags that choose between actions (validated by :mod:`.flags`)."""

    startup: str = "allow-cached"
    on_delete: str = "retain"
    on_drift: str = "warn"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str
    """Why, in one value-free phrase (the fatal log line when ``action`` is FAIL)."""


_FAIL_STARTUP: Final = "the first fetch failed"


def decide(
    latest: Latest,
    *,
    published: bool,
    disk: Disk,
    policy: Policy,
    canary_admits: bool,
    starting: bool = False,
) -> Decision:
    """The next action.

    ``published``: this agent has published a document since it started (its canary may
    hold later ones; a delete removes only what it published). ``starting``: the first fetch
    just failed or found nothing — the startup policy applies only then; later, a store
    that is still down, or a document that never existed, is waited for.
    """
    if latest in (Latest.NONE, Latest.ABSENT) and not published:
        if starting:
            return _startup(disk, policy)
        return Decision(Action.NOTHING, "waiting for the document")
    if latest is Latest.ABSENT:
        return _absent(disk, policy)
    if latest is Latest.NONE:
        return _unchanged(disk, policy)
    if latest is Latest.NEW:
        if published and not canary_admits:
            return Decision(Action.HOLD, "the canary does not admit this pod yet")
        return Decision(Action.PUBLISH, "a new document")
    return _unchanged(disk, policy)


def _startup(disk: Disk, policy: Policy) -> Decision:
    if policy.startup == "require-fresh":
        return Decision(Action.FAIL, _FAIL_STARTUP)
    if policy.startup == "allow-cached":
        if disk is Disk.CACHED:
            return Decision(Action.NOTHING, "serving the cached file")
        return Decision(Action.FAIL, f"{_FAIL_STARTUP} and the file holds nothing to serve")
    if disk is Disk.MISSING:
        return Decision(Action.EMPTY, "serving the empty document until the store answers")
    return Decision(Action.NOTHING, "serving what the files hold until the store answers")


def _unchanged(disk: Disk, policy: Policy) -> Decision:
    if disk is Disk.DRIFTED:
        return _drifted(policy)
    return Decision(Action.NOTHING, "the files hold the published document")


def _absent(disk: Disk, policy: Policy) -> Decision:
    if policy.on_delete == "fail":
        return Decision(Action.FAIL, "the document is no longer in the store")
    if disk is Disk.DRIFTED:
        drift = _drifted(policy)
        if drift.action is Action.REPAIR and policy.on_delete == "remove":
            return Decision(Action.EMPTY, drift.reason)  # what this agent last wrote was empty
        return drift
    if policy.on_delete == "remove" and disk is not Disk.EMPTY:
        return Decision(Action.EMPTY, "the document is no longer in the store")
    return Decision(Action.NOTHING, "the last good file stays")


def _drifted(policy: Policy) -> Decision:
    if policy.on_drift == "fail":
        return Decision(Action.FAIL, "the rendered file was written by something else")
    if policy.on_drift == "repair":
        return Decision(Action.REPAIR, "the rendered file was written by something else")
    return Decision(Action.NOTHING, "the rendered file was written by something else")


# ---------------------------------------------------------------------------- observations
def latest_kind(latest: Prepared | Absent | None, published: Prepared | None) -> Latest:
    """What the newest answer is, against what was last published."""
    if latest is None:
        return Latest.NONE
    if isinstance(latest, Absent):
        return Latest.ABSENT
    return Latest.SAME if latest.unchanged_from(published) else Latest.NEW


def recorded_disk(on_disk: Mapping[Path, bytes]) -> Disk:
    """The files as this agent last wrote them (no read: a delivery's view)."""
    if on_disk and all(data == b"" for data in on_disk.values()):
        return Disk.EMPTY
    return Disk.OURS


def drifted_files(on_disk: Mapping[Path, bytes]) -> list[Path]:
    """The outputs whose bytes are no longer what this agent wrote (blocking: reads files)."""
    return [path for path, data in on_disk.items() if read_published(path) != data]


Stamp = tuple[int, int, int, int, int]
"""A regular file's device, inode, size, modification and change times (nanoseconds)."""


def file_stamp(path: Path) -> Stamp | None:
    """The stamp of the regular file at ``path`` (a final symlink is not followed), or None."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


class DriftCheck:
    """The interval's drift check, reading a file only when something may have touched it.

    A file read back intact is remembered with the stamp taken *before* that read. While the
    stamp stays the same the bytes do too: a rename over the file moves its inode, and any
    write moves its change time, which no caller can set back (``utime`` sets it to now). So
    an idle agent's check is one ``lstat`` per output on the loop, and only a file whose
    stamp moved (or one never read back) is read again, off the loop, with
    :func:`drifted_files`' comparison.
    """

    def __init__(self) -> None:
        self._intact: dict[Path, Stamp] = {}

    def unsure(self, on_disk: Mapping[Path, bytes]) -> dict[Path, bytes]:
        """The outputs to read back (a stat each; cheap enough for the loop)."""
        return {
            path: data
            for path, data in on_disk.items()
            if (stamp := file_stamp(path)) is None or self._intact.get(path) != stamp
        }

    def drifted(self, unsure: Mapping[Path, bytes]) -> list[Path]:
        """Read ``unsure`` back (blocking): the drifted ones; the intact ones are remembered."""
        drifted = []
        for path, data in unsure.items():
            stamp = file_stamp(path)
            if stamp is not None and read_published(path) == data:
                self._intact[path] = stamp
            else:
                self._intact.pop(path, None)
                drifted.append(path)
        return drifted


def startup_disk(request: RenderRequest, *, allow_cached: bool) -> Disk:
    """What the outputs hold before this agent wrote anything (an earlier run's files)."""
    main = read_published(request.main.path)
    cached = main is not None and bool(main.strip())
    if any(read_published(spec.path) is None for spec in request.outputs):
        return Disk.CACHED if allow_cached and cached else Disk.MISSING
    return Disk.CACHED if cached else Disk.EMPTY
