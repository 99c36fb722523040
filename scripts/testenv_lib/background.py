"""Slow installs in one background worker, so the tests that need none of them run meanwhile.

On a cold machine most of ``scripts/dev test``'s install time is Go builds (the control plane
and kubelet, helm, promtool, HashiCorp Vault, the images) that only part of the suite uses.
``install --background NAMES`` hands them, in that order, to one worker process and returns at
once. Whatever needs a queued component waits for the worker to finish *that* one, never more:
``start`` of a server that needs it, ``install`` of it, ``wait NAMES``, and the pytest plugin
``tests/fixtures/background.py`` (which also runs the tests that need nothing queued first, and
waits outside a test's own timeout). Nothing else changes: a warm cache empties the queue in
seconds, and without ``--background`` every install runs in the foreground as before.

Layout under ``Context.run``:

- ``background/order``         the queued names, in build order
- ``background/pending/<name>`` present until the worker is done with ``name``
- ``background/failed/<name>``  the error, when ``name`` failed
- ``pids/background-install.pid``, ``logs/background-install.log``: the worker, so a bare
  ``stop`` ends it with everything else

Standard library only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .common import Context, TestenvError, log, process_alive, system_tool

WORKER = "background-install"
NICENESS = "10"
"""The worker yields the cores to the tests it runs beside (whose timings are asserted)."""
POLL_SECONDS = 2.0


def _dir(ctx: Context, part: str) -> Path:
    return ctx.run / "background" / part


def queued(ctx: Context) -> list[str]:
    """Every component the last ``install --background`` queued, in build order."""
    order_file = _dir(ctx, "order")
    return order_file.read_text().split() if order_file.exists() else []


def pending(ctx: Context) -> list[str]:
    """The queued components the worker has not finished, in build order."""
    return [name for name in queued(ctx) if (_dir(ctx, "pending") / name).exists()]


def worker_alive(ctx: Context) -> bool:
    pid = ctx.pid_of(WORKER)
    return pid is not None and process_alive(pid)


def queue(ctx: Context, names: list[str]) -> None:
    """Start the worker on ``names`` (in this order); returns as soon as it runs."""
    if worker_alive(ctx):
        raise TestenvError(f"a background install is already running ({pending(ctx)})")
    for part in ("pending", "failed"):
        directory = _dir(ctx, part)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.iterdir():
            stale.unlink()
    for name in names:
        (_dir(ctx, "pending") / name).touch()
    _dir(ctx, "order").write_text("\n".join(names) + "\n")
    script = ctx.repo / "scripts" / "testenv"
    ctx.spawn(
        WORKER,
        [
            system_tool("nice"),
            "-n",
            NICENESS,
            sys.executable,
            str(script),
            "install",
            "--worker",
            *names,
        ],
        env={"DYNCONF_TESTENV_RUN": str(ctx.run), "DYNCONF_TESTENV_CACHE": str(ctx.cache)},
    )
    log(f"background install of {', '.join(names)} started "
        f"(log: {ctx.run / 'logs' / (WORKER + '.log')})")  # fmt: skip


def forget(ctx: Context) -> None:
    """Drop what a stopped worker left queued (a bare ``stop`` ends the worker with the rest)."""
    directory = _dir(ctx, "pending")
    if directory.is_dir():
        for name in directory.iterdir():
            name.unlink()


def work(ctx: Context, names: list[str], installers: dict[str, Callable[[Context], None]]) -> int:
    """The worker: install each name in turn, marking it done (or failed) as it goes."""
    failed = []
    total = time.monotonic()
    for part in ("pending", "failed"):
        _dir(ctx, part).mkdir(parents=True, exist_ok=True)
    for name in names:
        started = time.monotonic()
        try:
            installers[name](ctx)
        except Exception as err:
            (_dir(ctx, "failed") / name).write_text(f"{err}\n")
            log(f"install {name} FAILED: {err}")
            failed.append(name)
        else:
            log(f"install {name}: {time.monotonic() - started:.2f} s")
        finally:
            (_dir(ctx, "pending") / name).unlink(missing_ok=True)
    log(f"background install total: {time.monotonic() - total:.2f} s")
    return 1 if failed else 0


def wait(ctx: Context, names: Iterable[str]) -> list[str]:
    """Block until the worker is done with every one of ``names`` it has queued.

    Returns the problems (a failed install, or a worker that ended before reaching a name);
    names that were never queued return at once.
    """
    wanted = [name for name in names if (_dir(ctx, "pending") / name).exists()]
    announced = False
    began = time.monotonic()
    while True:
        left = [name for name in wanted if (_dir(ctx, "pending") / name).exists()]
        if not left:
            break
        if not worker_alive(ctx):
            return [f"the background install ended before {name} was installed; see "
                    f"{ctx.run / 'logs' / (WORKER + '.log')}" for name in left]  # fmt: skip
        if not announced:
            log(f"waiting for the background install of {', '.join(left)}")
            announced = True
        time.sleep(POLL_SECONDS)
    if announced:
        log(f"waited {time.monotonic() - began:.0f} s for {', '.join(wanted)}")
    problems = []
    for name in names:
        failed = _dir(ctx, "failed") / name
        if failed.exists():
            problems.append(f"install {name} failed in the background: {failed.read_text()}")
    return problems
