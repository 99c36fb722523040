"""The sidecar's watch loop (contract §2.3), on anyio.

First fetch before any watch, then three tasks share one :class:`~.metrics.AgentState`:

* the **follower** (:class:`dynconf.follow.Follower`, the one shared with the node agent and
  ``dynconf render --watch``) runs the store's own ``changes`` into a latest-wins slot,
  reopens it after a backoff, resyncs a push store every ``--watch`` seconds and catches a
  poll store up after each prime, so a change made between a read and a watch's prime is not
  lost; its events feed ``watch_connected``, ``watch_reconnects_total``, ``resyncs_total``;
* the **consumer** renders each delivered document through dynconf's pipeline (all outputs or
  none), skips an unchanged one, holds one the canary does not admit, publishes, notifies;
* the **ticker** checks drift, trust material and the canary every interval.

Anything that must end the agent (on-delete ``fail``, on-drift ``fail``, a failed rebuild)
raises :class:`AgentFatal`; a trust-material change ends the task group with a rebuild, and the
loop re-enters with a new client and every counter intact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import TaskGroup

from dynconf.errors import DynconfError, Origin
from dynconf.follow import Delivery, Follower, FollowEvents, Slot, StoreDriver, reason_of
from dynconf.pipeline import Prepared, prepare, publish, publish_empty
from dynconf.publish import read_published
from dynconf.stores import Absent, Fetched, WatchCapability
from dynconf_k8s.agent.canary import Canary
from dynconf_k8s.agent.events import EventWriter
from dynconf_k8s.agent.flags import AgentSettings
from dynconf_k8s.agent.metrics import AgentMetrics, AgentState
from dynconf_k8s.agent.notify import send_notification
from dynconf_k8s.agent.tracing import Tracing
from dynconf_k8s.agent.trust import CONFIRM_DELAY, fingerprint

__all__ = ["AgentFatal", "WatchLoop"]

log = logging.getLogger("dynconf_k8s.agent")

BuildDriver = Callable[[], StoreDriver]


class AgentFatal(Exception):
    """The agent must exit 1; the message is the one log line that says why."""


class _Rebuild(Exception):
    """Trust material moved: leave the task group, rebuild the client, re-enter."""


_reason = reason_of


class _Counted(FollowEvents):
    """The follower's events, counted into the agent's series."""

    def __init__(self, state: AgentState) -> None:
        self.state = state

    def read(self, kind: str) -> None:
        self.state.read_succeeded()
        if kind == "resync":
            self.state.bump("resyncs_total")

    def read_failed(self, kind: str) -> None:
        if kind in ("reopen", "resync"):
            self.state.bump("render_failures_total")

    def delivered(self) -> None:
        self.state.bump("deliveries_total")
        self.state.read_succeeded()

    def watch_failed(self) -> None:
        self.state.bump("watch_reconnects_total")

    def watching(self) -> None:
        self.state.read_succeeded()

    def reopening(self) -> None:
        self.state.bump("watch_reconnects_total")


class WatchLoop:
    """One agent's loop: a store, a render request, the state the port reports."""

    def __init__(
        self,
        settings: AgentSettings,
        metrics: AgentMetrics,
        build_driver: BuildDriver,
        *,
        events: EventWriter | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.settings = settings
        self.tracing = tracing or Tracing()
        self.metrics = metrics
        self.state = metrics.state
        self.build_driver = build_driver
        self.driver = build_driver()
        self.events = events
        self.canary = Canary(settings.canary, settings.pod_name)
        self.interval = float(settings.watch or 1)
        self.slot = Slot()
        self.last_prepared: Prepared | None = None
        self.on_disk: dict[Path, bytes] = {}
        """What this agent last wrote to each output (the drift check's reference)."""
        self.held: Prepared | None = None
        self.follower = Follower(
            self.driver,
            self.interval,
            self.slot,
            fetch=self.fetch,
            events=_Counted(self.state),
            # a --dynamic read issues a new credential: no catch-up, no read before a reopen
            reread=not settings.dynamic,
            log=log,
        )
        self.trust = fingerprint(settings.trust_files) if settings.trust_files else ""
        self.tg: TaskGroup | None = None
        self.lease_base = (0, 0)
        """Lease counts of clients replaced by a rebuild, so the series never go back."""
        self.state.connected = self._connected
        self.state.refresh = self._mirror_lease

    # ------------------------------------------------------------------ health
    def _connected(self) -> bool:
        if not self.follower.watching:
            return False
        own = self.driver.connected()
        if self.driver.capability is not WatchCapability.PUSH:
            return True
        return own if own is not None else self.follower.healthy

    # ------------------------------------------------------------------ start
    async def fetch(self, kind: str) -> Fetched | Absent:
        """One read of the store (the ``fetch`` span), whatever asked for it."""
        with self.tracing.span("fetch", store=self.driver.describe(), kind=kind):
            return await self.driver.fetch()

    async def first_fetch(self) -> bool:
        """Step 1: fetch and publish, or apply the startup policy. True when rendered."""
        try:
            answer = await self.fetch("first")
        except Exception as error:
            return await self._first_failed(_reason(error))
        self.state.read_succeeded()
        self.follower.seen(answer)
        if isinstance(answer, Absent):
            self._mark_absent()
            return await self._first_failed("the document is not in the store")
        try:
            await self._render(Delivery(answer, "first", time.monotonic()), first=True)
        except DynconfError as error:
            raise AgentFatal(f"the first render failed: {error}") from None
        return True

    async def render_now(self, answer: Fetched) -> None:
        """Render and publish one document outside the loop (init mode); raises on failure."""
        await self._render(Delivery(answer, "first", time.monotonic()), first=True)

    async def _first_failed(self, reason: str) -> bool:
        policy = self.settings.startup_policy
        main = self.settings.request.main.path
        if policy == "require-fresh":
            raise AgentFatal(f"the first fetch failed: {reason}")
        if policy == "allow-cached":
            cached = read_published(main)
            if cached is None or not cached.strip():
                raise AgentFatal(
                    f"the first fetch failed and {main} holds nothing to serve: {reason}"
                )
            self.state.bump("render_failures_total")
            log.warning("serving_cached", extra={"file": str(main), "reason": reason})
            return False
        written = await anyio.to_thread.run_sync(
            lambda: publish_empty(self.settings.request, only_missing=True)
        )
        self.state.bump("render_failures_total")
        log.warning("serving_empty", extra={"files": [str(p) for p in written], "reason": reason})
        return False

    # ------------------------------------------------------------------ run
    async def run(self) -> None:
        """Watch until cancelled (SIGTERM) or a fatal error; rebuild in place on rotation."""
        while True:
            rebuild = False
            try:
                async with anyio.create_task_group() as tg:
                    self.tg = tg
                    tg.start_soon(self.follower.run)
                    tg.start_soon(self._consume_forever)
                    tg.start_soon(self._tick_forever)
            except* _Rebuild:
                rebuild = True
            except* AgentFatal as group:
                raise group.exceptions[0] from None
            if not rebuild:
                return
            await self._rebuild()

    async def _rebuild(self) -> None:
        self.follower.watching = False
        self._mirror_lease()
        self.lease_base = (self.state.lease_renewals_total, self.state.lease_renewal_failures_total)
        await self.driver.close()
        try:
            self.driver = await anyio.to_thread.run_sync(self.build_driver)
        except Exception as error:
            raise AgentFatal(f"the store client could not be rebuilt: {_reason(error)}") from None
        self.follower.driver = self.driver
        self.state.bump("tls_reloads_total")
        log.info("client_rebuilt", extra={"store": self.driver.describe()})
        answer = await self.follower.read("rebuild")
        if answer is not None:
            self.follower.put(answer, "reopen")

    # ------------------------------------------------------------------ consume
    async def _consume_forever(self) -> None:
        while True:
            delivery = await self.slot.take()
            try:
                await self._render(delivery)
            except DynconfError as error:
                self.state.bump("render_failures_total")
                log.warning(
                    "render_failed",
                    extra={"kind": error.kind.value, "path": error.path, "reason": str(error)},
                )
                self._event("RenderFailed", f"the render failed, the last good file stays: {error}")
            except AgentFatal:
                raise
            except Exception as error:  # a document never ends the agent: one line, go on
                self.state.bump("render_failures_total")
                reason = f"the render failed ({type(error).__name__}); the last good file stays"
                log.warning(
                    "render_failed", extra={"kind": "backend", "path": "", "reason": reason}
                )
                self._event("RenderFailed", reason)

    async def _render(self, delivery: Delivery, *, first: bool = False) -> None:
        answer = delivery.answer
        if isinstance(answer, Absent):
            await self._absent()
            return
        started = delivery.at
        origin = Origin.remote(self.driver.describe())
        with self.tracing.span(
            "render",
            store=self.driver.describe(),
            kind=delivery.kind,
            outputs=len(self.settings.request.outputs),
        ):
            prepared = await anyio.to_thread.run_sync(
                lambda: prepare(answer, self.settings.request, origin=origin)
            )
        self._present()
        self._note_lease(answer)
        if prepared.unchanged_from(self.last_prepared):
            self.held = None
            self.state.canary_holding = 0
            level = logging.DEBUG if delivery.kind == "resync" else logging.INFO
            log.log(level, "unchanged", extra={"fingerprint": prepared.fingerprint})
            return
        if not first and not self.canary.admits():
            self.state.canary_percent = self.canary.percent
            self.held = prepared
            self.state.canary_holding = 1
            log.info(
                "canary_holding",
                extra={"bucket": self.canary.bucket, "percent": self.canary.percent},
            )
            return
        self.state.canary_percent = self.canary.percent
        await self._publish(prepared)
        self.metrics.reconcile.observe(max(0.0, time.monotonic() - started))

    async def _publish(self, prepared: Prepared, *, repair: bool = False) -> None:
        notify = self.settings.notify
        token = anyio.lowlevel.current_token()

        def after_files() -> None:
            # every document is renamed; the meta files come after this hook
            self._published(prepared, repair=repair)
            if notify is not None and not repair and self.tg is not None:
                anyio.from_thread.run_sync(self.tg.start_soon, self._notify, token=token)

        with self.tracing.span(
            "publish",
            fingerprint=prepared.fingerprint,
            revision=prepared.revision,
            repair=repair,
        ):
            result = await anyio.to_thread.run_sync(
                lambda: publish(prepared, self.settings.request, after_files=after_files)
            )
        if not repair:
            log.info(
                "rendered",
                extra={
                    "files": [str(p) for p in result.paths],
                    "bytes": result.size,
                    "fingerprint": prepared.fingerprint,
                    "revision": prepared.revision,
                },
            )

    def _published(self, prepared: Prepared, *, repair: bool) -> None:
        self.on_disk = dict(prepared.outputs)
        self.state.drift = 0
        if repair:
            return
        self.last_prepared = prepared
        self.held = None
        self.state.canary_holding = 0
        with self.state.lock:
            self.state.renders_total += 1
            self.state.last_render_timestamp_seconds = float(int(time.time()))
            self.state.last_render_monotonic = time.monotonic()
            self.state.published_fingerprint = prepared.fingerprint
            if prepared.revision is not None and prepared.revision.isdigit():
                self.state.generation = int(prepared.revision)

    async def _notify(self) -> None:
        if self.settings.notify is None:
            return
        ok = await send_notification(self.settings.notify)
        self.state.bump("notifications_total" if ok else "notification_failures_total")

    # ------------------------------------------------------------------ absent
    def _mark_absent(self) -> bool:
        if self.state.absent:
            return False
        self.state.absent = 1
        self.state.bump("absent_total")
        return True

    def _present(self) -> None:
        self.state.absent = 0

    async def _absent(self) -> None:
        if not self._mark_absent():
            return
        policy = self.settings.on_delete
        log.warning("document_absent", extra={"store": self.driver.describe(), "on_delete": policy})
        self._event(
            "DocumentAbsent",
            f"the document is no longer in the store "
            f"({self.driver.describe()}); on-delete is {policy}",
        )
        if policy == "fail":
            raise AgentFatal("the document is no longer in the store")
        if policy == "remove":
            try:
                await anyio.to_thread.run_sync(lambda: publish_empty(self.settings.request))
            except DynconfError as error:
                self.state.bump("render_failures_total")
                log.warning("write_failed", extra={"reason": str(error)})
                return
            self.on_disk = {spec.path: b"" for spec in self.settings.request.outputs}
            self.last_prepared = None  # a recreated document is published again

    # ------------------------------------------------------------------ ticks
    async def _tick_forever(self) -> None:
        while True:
            await anyio.sleep(self.interval)
            follower = self.follower
            if (
                self.driver.capability is not WatchCapability.PUSH
                and not self.driver.reports_watching
                and follower.healthy
                and follower.watching
                and follower.fresh_reads
            ):
                # a poll store that reports failures but not its quiet successes: no failure
                # is a read (one that reports each poll keeps staleness exact on its own)
                self.state.read_succeeded()
            await self._check_drift()
            await self._check_trust()
            await self._check_canary()

    async def _check_drift(self) -> None:
        if not self.on_disk:
            return
        drifted = [
            path
            for path, data in self.on_disk.items()
            if await anyio.to_thread.run_sync(read_published, path) != data
        ]
        if not drifted:
            self.state.drift = 0
            return
        if not self.state.drift:
            self.state.bump("drift_total")
            log.warning(
                "drift",
                extra={"files": [str(p) for p in drifted], "on_drift": self.settings.on_drift},
            )
        self.state.drift = 1
        if self.settings.on_drift == "fail":
            raise AgentFatal("the rendered file was written by something else")
        if self.settings.on_drift == "repair" and self.last_prepared is not None:
            try:
                await self._publish(self.last_prepared, repair=True)
                log.info("drift_repaired", extra={"files": [str(p) for p in drifted]})
            except DynconfError as error:
                self.state.bump("render_failures_total")
                log.warning("write_failed", extra={"reason": str(error)})

    async def _check_trust(self) -> None:
        files = self.settings.trust_files
        if not files or not self.settings.tls_reload:
            return
        first = fingerprint(files)
        if first == self.trust:
            return
        await anyio.sleep(CONFIRM_DELAY)
        if fingerprint(files) != first:
            return  # still being written: look again next interval
        self.trust = first
        log.info("trust_material_changed", extra={"files": list(files)})
        raise _Rebuild

    async def _check_canary(self) -> None:
        admitted = self.canary.admits()
        self.state.canary_percent = self.canary.percent
        if self.held is not None and admitted:
            held = self.held
            try:
                await self._publish(held)
            except DynconfError as error:
                self.state.bump("render_failures_total")
                log.warning("write_failed", extra={"reason": str(error)})

    # ------------------------------------------------------------------ leases
    def _note_lease(self, answer: Fetched) -> None:
        if answer.lease is not None:
            self.state.lease_ttl_seconds = answer.lease.ttl_seconds

    def _mirror_lease(self) -> None:
        """Copy the lease bookkeeping the store's own watch keeps (vault ``--dynamic``).

        The vault source renews at 65 % and re-issues at 90 % inside its ``changes``; a
        renewal delivers nothing (no re-render), a re-issue delivers the new credential.
        """
        source = self.driver.source
        renewals = getattr(source, "lease_renewals", None)
        failures = getattr(source, "lease_renewal_failures", None)
        if isinstance(renewals, int):
            self.state.lease_renewals_total = self.lease_base[0] + renewals
        if isinstance(failures, int):
            self.state.lease_renewal_failures_total = self.lease_base[1] + failures
        schedule = getattr(source, "lease_schedule", None)
        lease = getattr(schedule, "lease", None)
        ttl = getattr(lease, "ttl_seconds", None)
        if isinstance(ttl, int | float):
            self.state.lease_ttl_seconds = float(ttl)

    def current_lease(self) -> object | None:
        """The lease to revoke on shutdown (the source's newest grant), if any."""
        schedule = getattr(self.driver.source, "lease_schedule", None)
        return getattr(schedule, "lease", None)

    def _event(self, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.send(reason, message)
