"""``dynamic-config-agent``: the process the webhook injects, as init container or sidecar.

Start-up is where every refusal belongs — an unknown flag, a store outside the image's plugin
lock, a combination the store's ``validate()`` refuses — so a misconfigured pod fails in its
events, not as a store error twenty minutes later. Then either one render (init: any failure
exits 1, there is nothing to fall back to) or the watch loop (sidecar: SIGTERM stops the
watches, revokes a dynamic lease if asked, and exits 0 within the grace period; a fatal error
exits 1 with one JSON log line saying why).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from dynconf.budget import ledger
from dynconf.errors import DynconfError, MissingError
from dynconf.logs import configure_logging, console_entry
from dynconf.plugins import (
    LOCK_ENV,
    PluginLock,
    Registry,
    default_registry,
    discover,
    load_locked,
    use_registry,
)
from dynconf.stores import Lease, StoreType
from dynconf_k8s.agent.flags import (
    USAGE,
    AgentSettings,
    UsageError,
    asked_for_info,
    help_text,
    parse_args,
)
from dynconf_k8s.agent.once import AgentFatal, render_once
from dynconf_k8s.agent.tracing import Tracing, tracing_from_env

if TYPE_CHECKING:  # the sidecar's modules: an init agent never imports them (agent.once)
    from dynconf.follow import StoreDriver
    from dynconf_k8s.agent.loop import WatchLoop
    from dynconf_k8s.agent.metrics import AgentMetrics

__all__ = ["BAKED_LOCK", "first_fatal", "main", "run", "store_state_dir"]

BAKED_LOCK: Final = Path("/opt/dynamic-config/plugins.lock")
"""Where the agent image bakes its plugin lock; ``DYNCONF_PLUGIN_LOCK`` overrides it."""
STORE_ALIASES: Final = {"config-server": ("config-server", "configserver")}

log = logging.getLogger("dynconf_k8s.agent")


def load_registry(environ: Mapping[str, str]) -> tuple[Registry, str | None]:
    """The plugins this process may use: the lock's when there is one, else discovery."""
    lock_path = environ.get(LOCK_ENV) or (str(BAKED_LOCK) if BAKED_LOCK.is_file() else None)
    if lock_path == (os.environ.get(LOCK_ENV) or None):
        # the process's registry is loaded the same way (open, or from this very lock), and
        # the contract's import may have loaded it already: load the plugins once
        registry = default_registry()
    elif lock_path is None:
        registry = discover()
    else:
        registry = load_locked(PluginLock.read(lock_path), origin=lock_path)
    use_registry(registry)
    return registry, lock_path


def store_type(registry: Registry, source: str, lock_path: str | None) -> StoreType:
    """The store type for ``--source``, refusing by name one the lock does not carry."""
    for name in STORE_ALIASES.get(source, (source,)):
        if name in registry.stores:
            return registry.stores[name]
    refusal = registry.refusal_for(source)
    if refusal is not None:
        raise MissingError(f"the {source} store did not load: {refusal.reason}")
    carried = ", ".join(sorted(registry.stores)) or "none"
    where = f"this agent's plugin lock ({lock_path})" if lock_path else "this installation"
    raise MissingError(
        f"the {source} store is not in {where}; it carries: {carried}. Use an agent image "
        "that bakes it, or regenerate the lock with it installed"
    )


def store_state_dir(settings: AgentSettings) -> Path:
    """``<dir>/.<name>.store`` beside the main file: the store's private state (git's clone
    cache), kept on the rendered volume like the file's ``.meta`` and ``.history``.

    The injected agent has a read-only root file system and a home it cannot write; the
    volume is the one place its pod lets it write, and an init agent's state is there for
    the sidecar that follows it. The store creates the directory (0700) on first use.
    """
    out = settings.request.main.path
    return out.with_name(f".{out.name}.store")


def _usage_failure(message: str) -> int:
    sys.stderr.write(f"dynamic-config-agent: {message}\n\n{USAGE}")
    return 1


def _fatal(message: str) -> int:
    log.error("agent_failed", extra={"reason": message})
    return 1


def run(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Parse, check, then render once or watch; the exit code (0 or 1)."""
    env = os.environ if environ is None else environ
    args = list(sys.argv[1:] if argv is None else argv)
    asked = asked_for_info(args)
    if asked == "help":
        sys.stdout.write(help_text())
        return 0
    if asked == "version":
        from dynconf.cli import version_line

        sys.stdout.write(version_line("dynamic-config-agent", "dynconf-k8s"))
        return 0
    configure_logging(environ=env)
    # The registry first, installed as the process's: parsing asks it which extensions the
    # loaded formats write, so this is the process's one plugin load (parsing first would
    # discover once for that, then the lock be loaded again here). A usage error is still
    # reported before a registry that did not load, as it always was.
    loaded: tuple[Registry, str | None] | DynconfError
    try:
        loaded = load_registry(env)
    except DynconfError as error:
        loaded = error
    try:
        settings = parse_args(args, env)
    except UsageError as error:
        return _usage_failure(str(error))
    try:
        if isinstance(loaded, DynconfError):
            raise loaded
        registry, lock_path = loaded
        store = store_type(registry, settings.source, lock_path)
    except DynconfError as error:
        return _fatal(str(error))
    refusals = store.validate(settings.spec)
    if refusals:
        return _usage_failure("; ".join(refusals))
    settings = replace(
        settings, spec=replace(settings.spec, state_dir=str(store_state_dir(settings)))
    )
    log.info(
        "agent starting",
        extra={
            "store": store.describe(settings.spec),
            "out": str(settings.request.main.path),
            "mode": "sidecar" if settings.watching else "init",
            "watch_seconds": settings.watch,
            "plugin_lock": lock_path,
        },
    )
    if settings.spec.tls.skip_verify:
        log.warning(
            "TLS VERIFICATION IS OFF: the store's certificate is not checked; anyone on the "
            "network path can read and rewrite this configuration",
            extra={"store": store.describe(settings.spec)},
        )

    if settings.store_budget is not None:
        ledger().configure({settings.source: settings.store_budget})

    tracing = tracing_from_env(env)
    try:
        if not settings.watching:
            render_once(settings, store, tracing)  # init mode: no event loop (agent.once)
            return 0
        return _run_sidecar(settings, store, tracing)
    except AgentFatal as error:
        return _fatal(str(error))
    except DynconfError as error:
        return _fatal(str(error))
    finally:
        tracing.shutdown()


def _run_sidecar(settings: AgentSettings, store: StoreType, tracing: Tracing) -> int:
    """Sidecar mode: the watch loop on anyio, with the metrics port when asked for."""
    import anyio

    from dynconf.follow import StoreDriver
    from dynconf_k8s.agent.metrics import AgentMetrics, AgentState

    metrics = AgentMetrics(
        AgentState(
            max_staleness=settings.max_staleness,
            require_ack=settings.require_ack,
            tls_verification_skipped=1 if settings.spec.tls.skip_verify else 0,
        )
    )

    def build() -> StoreDriver:
        return StoreDriver.built(
            lambda: store.build(settings.spec), calls=ledger().for_spec(settings.spec)
        )

    return anyio.run(_run_async, settings, metrics, build, tracing)


async def _run_async(
    settings: AgentSettings,
    metrics: AgentMetrics,
    build: Callable[[], StoreDriver],
    tracing: Tracing,
) -> int:
    from dynconf_k8s.agent.events import EventWriter
    from dynconf_k8s.agent.loop import WatchLoop

    try:
        loop = WatchLoop(
            settings,
            metrics,
            build,
            events=EventWriter(settings.pod_name, settings.pod_uid) if settings.events else None,
            tracing=tracing,
        )
    except DynconfError as error:
        raise AgentFatal(f"the store client could not be built: {error}") from None
    return await _sidecar(settings, metrics, loop)


def first_fatal(group: BaseExceptionGroup[BaseException]) -> AgentFatal | None:
    """The first :class:`AgentFatal` among ``group``'s leaves, however deeply nested.

    Task groups end with a group, and the loop re-raises its fatal error from an ``except*``
    clause; before CPython 3.11.4 (Debian 12 ships 3.11.2) an exception raised there leaves
    wrapped in a group of its own, so the fatal error can arrive one or more groups deep.
    """
    for leaf in group.exceptions:
        if isinstance(leaf, AgentFatal):
            return leaf
        if isinstance(leaf, BaseExceptionGroup):
            found = first_fatal(leaf)
            if found is not None:
                return found
    return None


async def _sidecar(settings: AgentSettings, metrics: AgentMetrics, loop: WatchLoop) -> int:
    import anyio
    import anyio.to_thread

    from dynconf_k8s.agent.events import EVENT_DEADLINE
    from dynconf_k8s.agent.server import serve_metrics

    fatal: list[AgentFatal] = []
    async with anyio.create_task_group() as tg:
        if settings.metrics_addr is not None:
            host, port = settings.metrics_addr
            await tg.start(serve_metrics, metrics, host, port)

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("stopping", extra={"signal": signal.Signals(signum).name})
                    tg.cancel_scope.cancel()
                    return

        async def work() -> None:
            try:
                await loop.first_fetch()
                await loop.run()
            except AgentFatal as error:
                fatal.append(error)
                tg.cancel_scope.cancel()
            except ExceptionGroup as group:
                found = first_fatal(group)
                if found is None:
                    raise
                fatal.append(found)
                tg.cancel_scope.cancel()

        tg.start_soon(stop_on_signal)
        tg.start_soon(work)
    with anyio.CancelScope(shield=True):
        await _shutdown(settings, metrics, loop)
        if fatal and loop.events is not None:
            # the Event saying why this agent dies is still on its way to the API server
            await anyio.to_thread.run_sync(loop.events.wait_sent, EVENT_DEADLINE)
    if fatal:
        raise fatal[0]
    log.info("stopped")
    return 0


async def _shutdown(settings: AgentSettings, metrics: AgentMetrics, loop: WatchLoop) -> None:
    """Revoke a dynamic lease when asked (within ``--revoke-grace``), then close the client."""
    import anyio
    import anyio.to_thread

    lease = loop.current_lease()
    revoke = getattr(loop.driver.source, "revoke", None)
    if (
        settings.dynamic
        and settings.revoke_on_shutdown
        and isinstance(lease, Lease)
        and callable(revoke)
    ):
        grace = settings.revoke_grace
        with anyio.move_on_after(grace) as scope:
            try:
                await anyio.to_thread.run_sync(revoke, lease, grace, abandon_on_cancel=True)
                metrics.state.bump("lease_revocations_total")
                log.info("lease_revoked")
            except DynconfError as error:
                log.warning("lease_not_revoked", extra={"reason": str(error)})
        if scope.cancelled_caught:
            log.warning("lease_not_revoked", extra={"reason": "the revoke grace ran out"})
    await loop.driver.close()


M_ARENA_MAX: Final = -8
"""glibc's ``mallopt`` parameter for the most malloc arenas a process keeps."""


def _one_malloc_arena() -> None:
    """Keep every thread's allocations in glibc's main malloc arena.

    glibc gives each thread that allocates concurrently an arena of its own, and memory
    freed there is not handed back to the others; the agent's few threads (the watch, the
    fetch/render workers, the store client's own) do short work, so one arena costs nothing
    measurable and keeps several MiB out of the RSS the pod's memory limit counts. Without
    glibc (musl) there is no such knob and nothing to do.
    """
    import ctypes

    try:
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, 1)
    except (OSError, AttributeError):
        return


@console_entry("dynamic-config-agent", hard_exit=True)
def main() -> None:
    """Console entry point: exit with :func:`run`'s code without waiting on store threads.

    A store client stuck in a long poll lives in a daemon or abandoned worker thread; the
    process must still end within the pod's grace period, so it exits directly once the logs
    are flushed.
    """
    _one_malloc_arena()
    code = run()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
