"""File-event watching with a debounce, a ceiling and an atomic-save grace.

Directories are watched, never files: editors and Kubernetes replace files by renaming
over them (a new inode), and the kubelet swaps a ``..data`` symlink, so a watch on the file
itself would go deaf after the first save. Only *relevant* events (the caller decides which
paths matter) restart the quiet period, and a hard ceiling of four quiet periods caps how
long a stream of edits can postpone a reload. After the quiet period the watcher waits a
short grace (25 ms by default) so a writer that saves in two steps has finished.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Final

__all__ = ["DEFAULT_DEBOUNCE", "FileWatch", "atomic_save_grace", "set_atomic_save_grace"]

DEFAULT_DEBOUNCE: Final = 0.25
_grace = {"seconds": 0.025}


def atomic_save_grace() -> float:
    """The process-wide pause between a settled event burst and the read, in seconds."""
    return _grace["seconds"]


def set_atomic_save_grace(seconds: float) -> None:
    """Change the grace for every watcher; takes effect from the next reload."""
    if seconds < 0:
        raise ValueError("the atomic-save grace cannot be negative; pass 0 to disable it")
    _grace["seconds"] = seconds


class FileWatch:
    """A background thread that calls ``on_settled(trigger)`` after each relevant burst.

    ``relevant(path)`` decides which events count; ``on_settled`` receives the first
    relevant path of the burst (the trigger). Exceptions from ``on_settled`` are handed to
    ``on_error`` (default: swallowed) so a bad reload never kills the watcher.
    ``poll_interval`` switches to polling, for filesystems that emit no events (NFS,
    some overlays); polling compares contents, not only modification times.
    """

    def __init__(
        self,
        directories: Iterable[Path],
        relevant: Callable[[Path], bool],
        on_settled: Callable[[Path], object],
        *,
        debounce: float = DEFAULT_DEBOUNCE,
        poll_interval: float | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        name: str = "dynconf-watch",
    ) -> None:
        self._directories = sorted({Path(d) for d in directories if Path(d).is_dir()})
        if not self._directories:
            raise OSError("could not start watching: none of the directories to watch exists")
        self._relevant = relevant
        self._on_settled = on_settled
        self._on_error = on_error
        self._debounce = max(debounce, 0.001)
        self._poll_interval = poll_interval
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def start(self) -> FileWatch:
        """Start watching; returns once the directories are registered."""
        self._thread.start()
        self._ready.wait(timeout=5.0)
        return self

    def stop(self) -> None:
        """Ask the thread to end; it notices within a tenth of a second."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def __enter__(self) -> FileWatch:
        return self.start() if not self._thread.is_alive() else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self.join(2.0)

    def _is_relevant(self, _change: object, path: str) -> bool:
        return self._relevant(Path(path))

    def _run(self) -> None:
        if self._poll_interval is not None:
            self._poll()
            return
        from watchfiles import watch

        step = int(self._debounce * 1000)
        for changes in watch(
            *self._directories,
            watch_filter=self._is_relevant,
            debounce=step * 4,
            step=step,
            stop_event=self._stop,
            rust_timeout=100,
            yield_on_timeout=True,
            recursive=False,
            raise_interrupt=False,
        ):
            self._ready.set()
            if self._stop.is_set():
                break
            if not changes:
                continue
            trigger = Path(min(path for _change, path in changes))
            self._settled(trigger)

    def _settled(self, trigger: Path) -> None:
        grace = atomic_save_grace()
        if grace:
            time.sleep(grace)
        try:
            self._on_settled(trigger)
        except Exception as exc:  # the watcher must outlive any reload failure
            if self._on_error is not None:
                self._on_error(exc)

    def _snapshot(self) -> dict[Path, bytes | None]:
        seen: dict[Path, bytes | None] = {}
        for directory in self._directories:
            try:
                entries = list(directory.iterdir())
            except OSError:
                continue
            for entry in entries:
                if not self._relevant(entry):
                    continue
                try:
                    seen[entry] = entry.read_bytes() if entry.is_file() else None
                except OSError:
                    seen[entry] = None
        return seen

    def _poll(self) -> None:
        assert self._poll_interval is not None
        previous = self._snapshot()
        self._ready.set()
        while not self._stop.wait(self._poll_interval):
            current = self._snapshot()
            if current != previous:
                moved = sorted(
                    p for p in current.keys() | previous.keys() if current.get(p) != previous.get(p)
                )
                previous = current
                self._settled(moved[0])
