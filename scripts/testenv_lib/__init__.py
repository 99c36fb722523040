"""``scripts/testenv``: install, start and stop the real loopback servers the test suite uses.

Each area module (``stores``, and when present ``kube``, ``tools`` and ``vault``) exposes two
tables:

- ``INSTALLERS: dict[str, Callable[[Context], None]]`` -- idempotent, cached under the cache dir;
- ``SERVERS: dict[str, Callable[[Context], dict[str, str]]]`` -- start one server (spawned through
  ``Context.spawn`` so ``stop`` finds it) and return the ``KEY=VALUE`` values to publish;
- optionally ``NEEDS: dict[str, list[str]]`` -- the installers a server needs before it starts
  (default: the installer of the same name, if there is one);
- optionally ``STORE_SERVERS: list[str]`` -- servers of a non-``stores`` area that a bare
  ``start`` starts too (every ``stores`` server is one);
- optionally ``STOPPERS: dict[str, Callable[[Context], None]]`` -- run before a server's
  recorded processes are signalled, for what they leave outside their process groups (the
  node's shims, pods, namespace and cgroups);
- optionally ``OPT_IN: list[str]`` -- installers a bare ``install`` runs only with
  ``DYNCONF_E2E=1`` (the node and the images: minutes of building that only the end-to-end
  tests need); naming them always installs them.
- optionally ``GATED: dict[str, str]`` -- installers a bare ``install`` leaves out when the named
  environment variable is ``0`` (cosign: ``DYNCONF_RELEASE=0``, to run the ladder without the
  release leg); naming them always installs them.
- optionally ``SLOW: dict[str, int]`` -- installers ``install --background`` hands to the
  background worker (``background.py``), each with its rank in the worker's build order (lowest
  first, across every area): what the end-to-end ladder needs comes first, since its tests are
  the longest stretch of the suite, then the tools a few tests use.

The dispatcher merges them; ``start`` installs what a server needs first, so a developer can run
``scripts/testenv start vault`` (or a fixture can) on a machine where ``install`` never ran.
Standard library only.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

from . import background
from .common import (
    Context,
    TestenvError,
    log,
    process_alive,
    read_env_file,
    stop_pids,
)

__all__ = ["Context", "TestenvError", "load_registry", "main", "startable_now"]

AREAS = ("stores", "kube", "tools", "vault", "certmanager", "node", "images")
"""Area modules, in install order; only ``stores`` must exist."""


@dataclass
class Registry:
    """The merged tables of every importable area module."""

    installers: dict[str, Callable[[Context], None]] = field(default_factory=dict)
    servers: dict[str, Callable[[Context], dict[str, str]]] = field(default_factory=dict)
    needs: dict[str, list[str]] = field(default_factory=dict)
    store_servers: list[str] = field(default_factory=list)
    stoppers: dict[str, Callable[[Context], None]] = field(default_factory=dict)
    opt_in: list[str] = field(default_factory=list)
    gated: dict[str, str] = field(default_factory=dict)
    slow_ranks: dict[str, int] = field(default_factory=dict)

    def add(self, area: str, module: ModuleType) -> None:
        self.installers.update(getattr(module, "INSTALLERS", {}))
        servers: dict[str, Callable[[Context], dict[str, str]]] = getattr(module, "SERVERS", {})
        self.servers.update(servers)
        self.needs.update(getattr(module, "NEEDS", {}))
        self.stoppers.update(getattr(module, "STOPPERS", {}))
        self.opt_in.extend(getattr(module, "OPT_IN", []))
        self.gated.update(getattr(module, "GATED", {}))
        self.slow_ranks.update(getattr(module, "SLOW", {}))
        if area == "stores":
            self.store_servers.extend(servers)
        self.store_servers.extend(getattr(module, "STORE_SERVERS", []))

    def ungated(self, name: str) -> bool:
        """Whether a bare ``install`` includes ``name`` (see ``GATED``)."""
        variable = self.gated.get(name)
        return variable is None or os.environ.get(variable, "") != "0"

    @property
    def slow(self) -> list[str]:
        """The background worker's build order."""
        return sorted(self.slow_ranks, key=self.slow_ranks.__getitem__)

    def needed(self, server: str) -> list[str]:
        if server in self.needs:
            return self.needs[server]
        return [server] if server in self.installers else []


def load_registry() -> Registry:
    """Import every area module that exists; a broken optional one is reported, not fatal."""
    registry = Registry()
    for area in AREAS:
        name = f"{__name__}.{area}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name and area != "stores":
                continue
            raise
        except Exception:
            if area == "stores":
                raise
            log(f"area module {area} failed to import; its servers are unavailable:")
            traceback.print_exc()
            continue
        registry.add(area, module)
    return registry


def group_procs(ctx: Context, server: str) -> list[str]:
    """Names of the processes ``server`` spawned in this run directory."""
    path = ctx.run / "groups" / server
    return path.read_text().split() if path.exists() else []


def running(ctx: Context, server: str) -> bool:
    """True if ``server`` published values and every process it spawned is alive."""
    if not (ctx.run / "published" / f"{server}.env").exists():
        return False
    for proc in group_procs(ctx, server):
        pid = ctx.pid_of(proc)
        if pid is None or not process_alive(pid):
            return False
    return True


def rebuild_env(ctx: Context) -> None:
    """Rewrite ``run/env`` from what the still-running servers published."""
    lines: list[str] = []
    for path in sorted((ctx.run / "published").glob("*.env")):
        lines.extend(f"{k}={v}\n" for k, v in read_env_file(path).items())
    (ctx.run / "env").write_text("".join(lines))


def stop_servers(ctx: Context, servers: list[str] | None, registry: Registry | None = None) -> int:
    """Stop the named servers (all recorded processes when None); returns an exit code."""
    groups_now = [p.name for p in (ctx.run / "groups").iterdir()]
    for server in groups_now if servers is None else servers:
        stopper = (registry.stoppers if registry else {}).get(server)
        if stopper:
            try:
                stopper(ctx)
            except Exception as err:  # the generic stop below must still run
                log(f"stop {server}: {err}")
    if servers is None:
        procs = [p.stem for p in (ctx.run / "pids").glob("*.pid")]
        groups = [p.name for p in (ctx.run / "groups").iterdir()]
    else:
        procs = [proc for server in servers for proc in group_procs(ctx, server)]
        groups = servers
    pids = {proc: pid for proc in procs if (pid := ctx.pid_of(proc)) is not None}
    started = time.monotonic()
    survivors = stop_pids(pids) if pids else []
    for proc in procs:
        (ctx.run / "pids" / f"{proc}.pid").unlink(missing_ok=True)
    for server in groups:
        (ctx.run / "groups" / server).unlink(missing_ok=True)
        (ctx.run / "published" / f"{server}.env").unlink(missing_ok=True)
    if servers is None:
        background.forget(ctx)
    rebuild_env(ctx)
    if servers is None:  # per-run secrets and data go with the run
        ctx.remove_data()
    if pids:
        log(f"stopped {len(pids)} process(es) in {time.monotonic() - started:.2f} s")
    if survivors:
        log(f"could not stop: {', '.join(survivors)}")
        return 1
    return 0


def cmd_install(
    ctx: Context, registry: Registry, names: list[str], *, in_background: bool = False
) -> int:
    """Install ``names`` (every component when empty); the slow ones go to the background
    worker when ``in_background``. A component the worker has queued is waited for, never
    installed twice at once."""
    if not names:
        e2e = os.environ.get("DYNCONF_E2E", "") == "1"
        names = [
            n
            for n in registry.installers
            if (e2e or n not in registry.opt_in) and registry.ungated(n)
        ]
    unknown = [n for n in names if n not in registry.installers]
    if unknown:
        log(f"unknown component(s) {unknown}; known: {', '.join(registry.installers)}")
        return 2
    slow = [n for n in registry.slow if n in names] if in_background else []
    for problem in background.wait(ctx, names):  # this install decides: it runs them again
        log(problem)
    failed: list[str] = []
    total = time.monotonic()
    for name in [n for n in names if n not in slow]:
        started = time.monotonic()
        try:
            registry.installers[name](ctx)
        except Exception as err:
            log(f"install {name} FAILED: {err}")
            failed.append(name)
            continue
        log(f"install {name}: {time.monotonic() - started:.2f} s")
    log(f"install total: {time.monotonic() - total:.2f} s")
    if slow:
        background.queue(ctx, slow)
    if failed:
        log(f"failed: {', '.join(failed)}")
        return 1
    return 0


def cmd_wait(ctx: Context, names: list[str]) -> int:
    """Wait for the background worker to finish ``names`` (all it queued when empty)."""
    problems = background.wait(ctx, names or background.queued(ctx))
    for problem in problems:
        log(problem)
    return 1 if problems else 0


def startable_now(ctx: Context, registry: Registry) -> list[str]:
    """The store servers a bare ``start`` starts: those needing nothing still in the worker."""
    waiting = set(background.pending(ctx))
    return [n for n in registry.store_servers if not waiting & set(registry.needed(n))]


def cmd_start(ctx: Context, registry: Registry, names: list[str]) -> int:
    """Start ``names`` (every store server when empty). A bare ``start`` leaves out the servers
    whose installs are still in the background worker: their fixtures start them later."""
    if not names:
        names = startable_now(ctx, registry)
        for later in sorted(set(registry.store_servers) - set(names)):
            log(f"{later} waits for its background install; its fixture starts it")
    unknown = [n for n in names if n not in registry.servers]
    if unknown:
        log(f"unknown server(s) {unknown}; known: {', '.join(registry.servers)}")
        return 2
    failed = []
    for name in names:
        if running(ctx, name):
            log(f"{name} already running")
            for key, value in ctx.published(name).items():
                print(f"{key}={value}", flush=True)
            continue
        stop_servers(ctx, [name], registry)  # leftovers of a half-dead earlier start
        started = time.monotonic()
        try:
            for installer in registry.needed(name):
                registry.installers[installer](ctx)
            ctx.current_server = name
            (ctx.run / "groups" / name).touch()
            values = registry.servers[name](ctx)
        except Exception as err:
            log(f"start {name} FAILED: {err}")
            if not isinstance(err, TestenvError):
                traceback.print_exc()
            stop_servers(ctx, [name], registry)
            failed.append(name)
            continue
        finally:
            ctx.current_server = None
        ctx.publish(name, values)
        log(f"start {name}: ready in {time.monotonic() - started:.2f} s")
    if failed:
        log(f"failed to start: {', '.join(failed)}")
        return 1
    return 0


def cmd_status(ctx: Context) -> int:
    servers = sorted(p.name for p in (ctx.run / "groups").iterdir())
    if not servers:
        print("no servers running")
    for server in servers:
        state = "running" if running(ctx, server) else "NOT RUNNING"
        print(f"{server}: {state}")
        for proc in group_procs(ctx, server):
            pid = ctx.pid_of(proc)
            alive = pid is not None and process_alive(pid)
            print(f"  {proc}: pid {pid} {'alive' if alive else 'dead'}")
        for key, value in ctx.published(server).items():
            print(f"  {key}={value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``scripts/testenv``."""
    parser = argparse.ArgumentParser(prog="testenv", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install (cached) every component, or the named ones")
    install.add_argument("names", nargs="*")
    install.add_argument(
        "--background",
        action="store_true",
        help="hand the slow components (the Go builds) to a background worker and return",
    )
    install.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    sub.add_parser(
        "wait", help="wait for the background install of the named components (or all)"
    ).add_argument("names", nargs="*")
    sub.add_parser("start", help="start every store server, or the named ones").add_argument(
        "names", nargs="*"
    )
    sub.add_parser("stop", help="stop every recorded process, or the named servers").add_argument(
        "names", nargs="*"
    )
    sub.add_parser("status", help="show what runs")
    sub.add_parser("env", help="print the published KEY=VALUE lines")
    sub.add_parser("list", help="list known components and servers")
    sub.add_parser(
        "doctor", help="check this machine for what `scripts/dev test` needs (a few seconds)"
    ).add_argument("--brief", action="store_true", help="print only what is missing")
    args = parser.parse_args(argv)

    ctx = Context()
    if args.command == "doctor":
        from . import doctor

        return doctor.main(ctx, brief=args.brief)
    if args.command == "env":
        sys.stdout.write((ctx.run / "env").read_text() if (ctx.run / "env").exists() else "")
        return 0
    if args.command == "status":
        return cmd_status(ctx)
    registry = load_registry()
    if args.command == "list":
        print("installers:", " ".join(registry.installers))
        print("servers:", " ".join(registry.servers))
        return 0
    if args.command == "install":
        if args.worker:
            return background.work(ctx, args.names, registry.installers)
        return cmd_install(ctx, registry, args.names, in_background=args.background)
    if args.command == "wait":
        return cmd_wait(ctx, args.names)
    if args.command == "start":  # before the lock: a wait must not hold up other starts
        needed = [i for n in args.names if n in registry.servers for i in registry.needed(n)]
        for problem in background.wait(ctx, needed):
            log(problem)
    with ctx.lock():
        if args.command == "start":
            return cmd_start(ctx, registry, args.names)
        return stop_servers(ctx, args.names or None, registry)
