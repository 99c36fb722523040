"""The sidecar's watch loop (contract §2.3), on anyio.

First fetch before any watch, then three tasks share one :class:`~.metrics.AgentState`:

* the **follower** (:class:`dynconf.follow.Follower`, the one shared with the node agent and
  ``dynconf render --watch``) runs the store's own ``changes`` into a latest-wins slot,
  reopens it after a backoff, resyncs a push store whenever no read or delivered change
  confirmed the document for ``--watch`` seconds (over a client of its own; a stream that is
  open and silent is not trusted), reopens a watch a resync caught missing a change, and
  catches a watch up after each prime, so a change made between a read and a watch's prime
  is not lost; its events feed ``watch_connected``, ``watch_reconnects_total``,
  ``resyncs_total`` and ``staleness_seconds`` (from the last confirmed read only);
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
from typing import Final

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.abc import TaskGroup

from dynconf.errors import DynconfError, Origin
from dynconf.follow import Delivery, Follower, FollowEvents, Slot, StoreDriver, reason_of
from dynconf.pipeline import Prepared, log_rendered, prepare, publish, publish_empty
from dynconf.stores import ABSENT, Absent, Fetched, WatchCapability
from dynconf_k8s.agent.canary import Canary
from dynconf_k8s.agent.decide import (
    Action,
    Decision,
    Disk,
    DriftCheck,
    Latest,
    Policy,
    decide,
    latest_kind,
    recorded_disk,
    startup_disk,
)
from dynconf_k8s.agent.events import EventWriter
from dynconf_k8s.agent.flags import AgentSettings
from dynconf_k8s.agent.metrics import AgentMetrics, AgentState
from dynconf_k8s.agent.notify import send_notification
from dynconf_k8s.agent.once import AgentFatal
from dynconf_k8s.agent.tracing import Tracing
from dynconf_k8s.agent.trust import CONFIRM_DELAY, fingerprint

__all__ = ["AgentFatal", "WatchLoop"]

log = logging.getLogger("dynconf_k8s.agent")

BuildDriver = Callable[[], StoreDriver]

INLINE_PREPARE_BYTES: Final = 64 * 1024
"""A document at most this long, written in a format (no template to render, no schema file
to read), is prepared on the loop: parsing and dumping it costs less than the two thread hops
around a worker call, which were a third of a change's way to the file on a busy node."""


class _Rebuild(Exception):
    """Trust material moved: leave the task group, rebuild the client, re-enter."""


_reason = reason_of


class _Counted(FollowEvents):
    """The follower's events, counted into the agent's series.

    A read or a delivered change is a confirmed read (``staleness_seconds`` restarts); a
    push stream's report that it is up is not: a stream that stalls without closing goes
    on saying so. A poll store's report is its poll, a read like any other.
    """

    def __init__(self, state: AgentState, *, push: bool) -> None:
        self.state = state
        self.push = push

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
        if not self.push:
            self.state.read_succeeded()

    def reopening(self) -> None:
        self.state.bump("watch_reconnects_total")

    def stalled(self) -> None:
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
        self.latest: Prepared | Absent | None = None
        """The newest document the store gave, rendered (or absent); None before any."""
        self.last_prepared: Prepared | None = None
        """What this agent last published (None again after on-delete removed it)."""
        self.published = False
        """A document has been published since the agent started (the canary's first)."""
        self.on_disk: dict[Path, bytes] = {}
        """What this agent last wrote to each output (the drift check's reference)."""
        self.acting = anyio.Lock()
        """Held from a decision until it is carried out. A delivery and the interval's
        reconcile both decide; without it the tick, deciding while a delivery's publish was
        still writing, saw the new document as not yet published and wrote it a second time."""
        self.drift_check = DriftCheck()
        self.policy = Policy(settings.startup_policy, settings.on_delete, settings.on_drift)
        self.follower = Follower(
            self.driver,
            self.interval,
            self.slot,
            fetch=self.fetch,
            events=_Counted(self.state, push=self.driver.capability is WatchCapability.PUSH),
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
            return await self.driver.read(kind, self.follower.read_deadline)

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
            self.latest = answer
            return await self._first_failed("the document is not in the store")
        try:
            await self._render(Delivery(answer, "first", time.monotonic()))
        except DynconfError as error:
            raise AgentFatal(f"the first render failed: {error}") from None
        return True

    async def _first_failed(self, reason: str) -> bool:
        disk = await anyio.to_thread.run_sync(
            lambda: startup_disk(
                self.settings.request, allow_cached=self.policy.startup == "allow-cached"
            )
        )
        decision = self._decide(disk, starting=True)
        main = self.settings.request.main.path
        if decision.action is Action.FAIL:
            if self.policy.startup == "allow-cached":
                raise AgentFatal(
                    f"the first fetch failed and {main} holds nothing to serve: {reason}"
                )
            raise AgentFatal(f"{decision.reason}: {reason}")
        self.state.bump("render_failures_total")
        if decision.action is Action.EMPTY:
            written = await anyio.to_thread.run_sync(
                lambda: publish_empty(self.settings.request, only_missing=True)
            )
            log.warning(
                "serving_empty", extra={"files": [str(p) for p in written], "reason": reason}
            )
        elif self.policy.startup == "allow-cached":
            log.warning("serving_cached", extra={"file": str(main), "reason": reason})
        else:
            log.warning("serving_empty", extra={"files": [], "reason": reason})
        return False

    # ------------------------------------------------------------------ decide
    def _decide(self, disk: Disk, *, starting: bool = False) -> Decision:
        admits = self.canary.admits()
        self.state.canary_percent = self.canary.percent
        return decide(
            latest_kind(self.latest, self.last_prepared),
            published=self.published,
            disk=disk,
            policy=self.policy,
            canary_admits=admits,
            starting=starting,
        )

    async def _carry_out(self, decision: Decision, *, delivered: bool) -> None:
        """Do what :func:`~.decide.decide` chose; ``delivered``: a store answer prompted it."""
        action = decision.action
        self.state.canary_holding = 1 if action is Action.HOLD else 0
        if action is Action.FAIL:
            raise AgentFatal(decision.reason)
        if action is Action.HOLD and delivered:
            log.info(
                "canary_holding",
                extra={"bucket": self.canary.bucket, "percent": self.canary.percent},
            )
        elif action is Action.PUBLISH:
            assert isinstance(self.latest, Prepared)
            await self._publish(self.latest)
        elif action is Action.REPAIR and self.last_prepared is not None:
            await self._publish(self.last_prepared, repair=True)
            log.info("drift_repaired", extra={"files": [str(p) for p in self.on_disk]})
        elif action is Action.EMPTY:
            await anyio.to_thread.run_sync(lambda: publish_empty(self.settings.request))
            self.on_disk = {spec.path: b"" for spec in self.settings.request.outputs}
            self.last_prepared = None  # a recreated document is published again

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

    async def _render(self, delivery: Delivery) -> None:
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
            if self.prepares_on_the_loop(answer):
                prepared = prepare(answer, self.settings.request, origin=origin)
            else:
                prepared = await anyio.to_thread.run_sync(
                    lambda: prepare(answer, self.settings.request, origin=origin)
                )
        self._present()
        self._note_lease(answer)
        async with self.acting:
            self.latest = prepared
            decision = self._decide(recorded_disk(self.on_disk))
            if (
                decision.action is Action.NOTHING
                and latest_kind(self.latest, self.last_prepared) is Latest.SAME
            ):
                level = logging.DEBUG if delivery.kind == "resync" else logging.INFO
                log.log(level, "unchanged", extra={"fingerprint": prepared.fingerprint})
            published = decision.action is Action.PUBLISH
            await self._carry_out(decision, delivered=True)
        if published:
            self.metrics.reconcile.observe(max(0.0, time.monotonic() - started))

    def prepares_on_the_loop(self, answer: Fetched) -> bool:
        """Whether ``answer`` is prepared without a worker thread (:data:`INLINE_PREPARE_BYTES`)."""
        request = self.settings.request
        return (
            len(answer.text) <= INLINE_PREPARE_BYTES
            and request.schema is None
            and all(spec.template is None for spec in request.outputs)
        )

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
            log_rendered(log, result, prepared)

    def _published(self, prepared: Prepared, *, repair: bool) -> None:
        self.on_disk = dict(prepared.outputs)
        self.state.drift = 0
        if repair:
            return
        self.last_prepared = prepared
        self.published = True
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
        async with self.acting:
            await self._absent_decided()

    async def _absent_decided(self) -> None:
        self.latest = ABSENT
        if self._mark_absent():
            policy = self.settings.on_delete
            store = self.driver.describe()
            log.warning("document_absent", extra={"store": store, "on_delete": policy})
            self._event(
                "DocumentAbsent",
                f"the document is no longer in the store ({store}); on-delete is {policy}",
            )
        try:
            await self._carry_out(self._decide(recorded_disk(self.on_disk)), delivered=True)
        except DynconfError as error:
            self.state.bump("render_failures_total")
            log.warning("write_failed", extra={"reason": str(error)})

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
            await self._reconcile()
            await self._check_trust()

    async def _reconcile(self) -> None:
        """Every interval: look at the files, decide again, carry it out (level-based)."""
        async with self.acting:
            disk = await self._observed_disk()
            try:
                await self._carry_out(self._decide(disk), delivered=False)
            except DynconfError as error:
                self.state.bump("render_failures_total")
                log.warning("write_failed", extra={"reason": str(error)})

    async def _observed_disk(self) -> Disk:
        """The files as they are now, against what this agent wrote; reports drift."""
        unsure = self.drift_check.unsure(self.on_disk)
        drifted = (
            await anyio.to_thread.run_sync(lambda: self.drift_check.drifted(unsure))
            if unsure
            else []
        )
        if not drifted:
            self.state.drift = 0
            return recorded_disk(self.on_disk)
        if not self.state.drift:
            self.state.bump("drift_total")
            log.warning(
                "drift",
                extra={"files": [str(p) for p in drifted], "on_drift": self.settings.on_drift},
            )
        self.state.drift = 1
        return Disk.DRIFTED

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
