"""The installation in force: one reference every reader takes whole, swapped when a new one parses.

A process that serves admissions (or renders) under an installation reads
:attr:`InstallationInForce.current` once per request and uses that object to the end of the
request. A new installation is offered by a source (the mounted document watched on disk,
:mod:`dynconf_k8s.inforce.disk`; the cluster-scoped resource, :mod:`dynconf_k8s.inforce.resource`)
as the *document* part only: the process's ``DYNAMIC_CONFIG_*`` variables are fixed for its life
and still win over the document, exactly as at start. The offer is judged by the one parser
(:func:`~dynconf_k8s.contract.document.merge_environment` then
:func:`~dynconf_k8s.contract.installation.parse_installation`); only a whole, valid installation
replaces the reference, so a reader never sees a half-applied one and a bad edit leaves the last
good installation in force.

The swap is a single attribute assignment of an immutable object: readers take no lock. Offers
are serialised by a lock (two sources, or a source and a test, never interleave their swaps).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge

from dynconf_k8s.contract.document import merge_environment
from dynconf_k8s.contract.installation import Installation, InstallationError, parse_installation

__all__ = [
    "OUTCOMES",
    "Applied",
    "InstallationInForce",
    "InstallationMetrics",
    "Offer",
    "Outcome",
]

log = logging.getLogger("dynconf_k8s.inforce")

Outcome = Literal["applied", "unchanged", "refused"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("applied", "unchanged", "refused")
"""The closed set of a reload's ``outcome`` label."""


@dataclass(frozen=True, slots=True)
class Applied:
    """An installation in force, with where it came from.

    ``generation`` is the source's version of it: the resource's ``metadata.generation``, or for
    the document on disk a count of the versions this process was offered (1 at start).
    """

    installation: Installation
    generation: int
    origin: str
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class Offer:
    """What one offer came to: the outcome, the generation offered and, when refused, why."""

    outcome: Outcome
    generation: int
    problems: tuple[str, ...] = ()

    @property
    def first_problem(self) -> str:
        """The first problem, as the parser says it (the field first, then what to do)."""
        return self.problems[0] if self.problems else ""


Listener = Callable[[Applied], None]


class InstallationInForce:
    """The one home of the installation a process serves with, and of its replacement.

    ``environ`` is the process's environment as at start (only ``DYNAMIC_CONFIG_*`` is used).
    ``first`` is the installation it started with (already validated by the caller, who
    refuses to start on an invalid one).
    """

    def __init__(
        self,
        first: Installation,
        environ: Mapping[str, str] | None = None,
        *,
        origin: str = "the environment",
        generation: int = 1,
    ) -> None:
        self._environ = {
            k: v for k, v in (environ or {}).items() if k.startswith("DYNAMIC_CONFIG_")
        }
        self._applied = Applied(first, generation, origin)
        self._offered = generation
        self._last: Offer = Offer("applied", generation)
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._reporters: list[Callable[[Offer, Applied], None]] = []

    @property
    def current(self) -> Installation:
        """The installation in force now (take it once per request)."""
        return self._applied.installation

    @property
    def applied(self) -> Applied:
        return self._applied

    @property
    def last_offer(self) -> Offer:
        """The latest offer's outcome; ``refused`` while a bad edit waits to be fixed."""
        return self._last

    @property
    def valid(self) -> bool:
        """False while the newest offered installation is not the one in force (it was refused)."""
        return self._last.outcome != "refused"

    def on_applied(self, listener: Listener) -> None:
        """Call ``listener`` after each swap (the operator re-reads its store budgets)."""
        self._listeners.append(listener)

    def on_offer(self, reporter: Callable[[Offer, Applied], None]) -> None:
        """Call ``reporter`` after every offer, whatever its outcome (metrics, status)."""
        self._reporters.append(reporter)

    def offer(self, document: str | None, *, origin: str, generation: int | None = None) -> Offer:
        """Judge ``document`` (``None``: no document) with the start-time variables; swap if valid.

        ``generation`` is the source's version; ``None`` counts one past the last offered.
        """
        with self._lock:
            number = self._offered + 1 if generation is None else generation
            self._offered = number
            try:
                installation = parse_installation(
                    merge_environment(self._environ, document, origin=origin)
                )
            except InstallationError as exc:
                result = Offer("refused", number, tuple(exc.problems))
                log.error(
                    "installation_refused",
                    extra={
                        "origin": origin,
                        "generation": number,
                        "in_force": self._applied.generation,
                        "problem": result.first_problem,
                        "problems": len(result.problems),
                    },
                )
            else:
                if installation == self._applied.installation:
                    result = Offer("unchanged", number)
                    self._applied = Applied(installation, number, origin, self._applied.at)
                else:
                    result = Offer("applied", number)
                    self._applied = Applied(installation, number, origin)
                    log.info("installation_applied", extra={"origin": origin, "generation": number})
            self._last = result
            applied = self._applied
        if result.outcome == "applied":
            for listener in self._listeners:
                listener(applied)
        for reporter in self._reporters:
            reporter(result, applied)
        return result


class InstallationMetrics:
    """The three reload series, under a component's prefix (ours, not the book's).

    ``<prefix>_installation_reloads_total{outcome}`` counts offers (``applied``,
    ``unchanged``, ``refused``); ``<prefix>_installation_generation`` is the generation in
    force; ``<prefix>_installation_valid`` is 1 while the newest offered installation is the one
    in force, 0 while a refused edit waits to be fixed.
    """

    def __init__(self, registry: CollectorRegistry, prefix: str) -> None:
        self.reloads = Counter(
            f"{prefix}_installation_reloads",
            "Installations offered by the document or the resource, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.generation = Gauge(
            f"{prefix}_installation_generation",
            "The generation of the installation in force.",
            registry=registry,
        )
        self.valid = Gauge(
            f"{prefix}_installation_valid",
            "1 while the newest installation offered is in force; 0 while a bad edit is kept out.",
            registry=registry,
        )
        for outcome in OUTCOMES:
            self.reloads.labels(outcome=outcome)

    def follow(self, holder: InstallationInForce) -> None:
        """Report ``holder``'s state now and after every offer."""
        self.generation.set(holder.applied.generation)
        self.valid.set(1 if holder.valid else 0)
        holder.on_offer(self._observe)

    def _observe(self, offer: Offer, applied: Applied) -> None:
        self.reloads.labels(outcome=offer.outcome).inc()
        self.generation.set(applied.generation)
        self.valid.set(0 if offer.outcome == "refused" else 1)
