"""What the fault ladder does to the node itself: a component restarted in place, a container
killed as a crash kills it, and the lock that keeps such a leg from running beside the others.

- ``restart_component(name, node, ready=...)``: stop one process ``scripts/testenv start
  node`` spawned (``node-apiserver``, ``node-kubelet``, ``node-scheduler``, …; the names of
  ``.testenv/pids``) — SIGTERM to its process group, SIGKILL after ``grace`` — and start it
  again exactly as it ran: the same argument vector, environment and working directory (read
  from ``/proc`` before it stops), inside the node's mount and network namespaces when it ran
  there, its output appended to its log, and its new pid recorded where ``testenv stop`` and
  ``status`` look. Returns once ``ready(gone)`` answers true (``gone``: the wall-clock time
  the old process was gone, to tell its last report from the new one's), with the timings. A process killed
  by a timeout between the stop and the start is the one way to leave the node without its
  component: the start is in a ``finally``.
- ``kill_container(node, pod, container)``: SIGKILL the container's process through the
  node's containerd (``ctr tasks kill``), as the OOM killer or a crash ends it; the kubelet
  sees it exit and restarts it under its pod's ``restartPolicy``.
- ``node_disruption(exclusive=...)``: a file lock under the run directory. A leg that takes
  the node's own processes down (the control plane, the kubelet) holds it exclusively; a leg
  that must not be run through such a restart holds it shared. Sessions and xdist workers
  see the same lock, so an exclusive holder waits until no shared one is in flight.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fixtures.kube import REPO, _run_dir
from tests.fixtures.node import KubeNode

sys.path.insert(0, str(REPO / "scripts"))
from testenv_lib.common import process_alive, stop_pids

__all__ = ["Restart", "kill_container", "node_disruption", "restart_component"]

_STARTED: list[subprocess.Popen[bytes]] = []
"""The processes started here: kept so none is reaped or warned about while it runs."""


@dataclass(frozen=True)
class Restart:
    """One component's restart: its new pid, and seconds to stop and to be ready again."""

    name: str
    pid: int
    stopped: float
    """Seconds from the SIGTERM until the old process was gone."""
    ready: float
    """Seconds from the new start until ``ready()`` answered true."""


def _image(pid: int) -> tuple[list[str], dict[str, str], str, str]:
    """A running process's argument vector, environment, working directory, mount namespace."""
    proc = Path(f"/proc/{pid}")
    argv = [a.decode() for a in (proc / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")]
    environ = (proc / "environ").read_bytes().decode(errors="surrogateescape")
    env = dict(e.split("=", 1) for e in environ.split("\0") if "=" in e)
    return argv, env, os.readlink(proc / "cwd"), os.readlink(proc / "ns" / "mnt")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"(no log: {error})"


def restart_component(
    name: str,
    node: KubeNode,
    *,
    ready: Callable[[float], bool],
    timeout: float = 180,
    grace: float = 15,
) -> Restart:
    """Stop the node's process ``name`` and start it again as it ran (the module docstring).

    ``ready(gone)`` is polled every 0.2 s after the start (an exception counts as not yet);
    the new process exiting, or ``timeout`` passing, fails with the tail of its log.
    """
    run = _run_dir()
    pid_file, log = run / "pids" / f"{name}.pid", run / "logs" / f"{name}.log"
    pid = int(pid_file.read_text())
    assert process_alive(pid), f"{name} (pid {pid}) is not running"
    argv, env, cwd, mnt = _image(pid)
    inside = mnt != os.readlink("/proc/self/ns/mnt")
    if inside:
        assert mnt == os.readlink(f"/proc/{node.holder_pid}/ns/mnt"), (
            f"{name} runs in a mount namespace that is neither this one nor the node's"
        )
    began = time.monotonic()
    child: subprocess.Popen[bytes] | None = None
    try:
        stop_pids({name: pid}, timeout=grace)
    finally:  # interrupted or not, a stopped component is started again
        stopped, gone = time.monotonic(), time.time()
        if not process_alive(pid):
            with log.open("ab") as out:
                child = subprocess.Popen(
                    node.nsenter(*argv) if inside else argv, stdin=subprocess.DEVNULL,
                    stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                    start_new_session=True,
                )  # fmt: skip
            _STARTED.append(child)
            pid_file.write_text(f"{child.pid}\n")
    assert child is not None, f"{name} (pid {pid}) outlived SIGKILL"
    deadline = stopped + timeout
    while True:
        with contextlib.suppress(Exception):
            if ready(gone):
                return Restart(name, child.pid, stopped - began, time.monotonic() - stopped)
        if child.poll() is not None:
            raise AssertionError(
                f"{name} exited ({child.returncode}) after its restart:\n{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} not ready {timeout} s after its restart:\n{_tail(log)}")
        time.sleep(0.2)


def kill_container(node: KubeNode, pod: Any, container: str) -> str:
    """SIGKILL ``container`` of ``pod`` (a ``V1Pod``) through containerd; its container id."""
    (status,) = [s for s in pod.status.container_statuses or [] if s.name == container]
    assert status.container_id, f"{pod.metadata.name}/{container} has no running container"
    _, _, container_id = str(status.container_id).partition("://")
    node.ctr("tasks", "kill", "--signal", "SIGKILL", container_id)
    return container_id


@contextlib.contextmanager
def node_disruption(*, exclusive: bool, timeout: float = 900) -> Iterator[None]:
    """Hold the node's disruption lock (exclusive: no one else holds it; shared: no exclusive
    holder does) for the block; fails after ``timeout`` seconds of waiting."""
    path = _run_dir() / "locks" / "node-disruption.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    with path.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{path} stayed held for {timeout} s: another leg is disturbing the node"
                        if not exclusive
                        else f"{path} stayed held for {timeout} s: other legs are in flight"
                    ) from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
