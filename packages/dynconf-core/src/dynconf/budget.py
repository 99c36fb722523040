"""What a process's calls to a store cost: counted per store and endpoint, paced by a budget.

A fleet of agents, or one operator rendering hundreds of documents, can flood a store. Every
call the follower (:mod:`dynconf.follow`) makes goes through the :class:`StoreCalls` of its
store and endpoint, which

* counts it by :data:`OUTCOMES` (``ok``, ``not_found``, ``unauthorized``, ``throttled``,
  ``error``; ``budget`` counts the calls the budget made wait or held back, so the calls
  sent are the sum of the other five);
* admits it through a :class:`TokenBucket` when the process was given a :class:`Budget` for
  that store (requests per second and a burst); without one the bucket never waits, so an
  installation that sets no budget behaves as before;
* holds the store's next calls for the ``Retry-After`` a 429 / 503 named
  (:class:`~dynconf.errors.ThrottledError`), capped at :data:`RETRY_AFTER_CAP`.

A wait is bounded (:data:`MAX_WAIT`): past it the call is not sent and raises
:class:`BudgetExceeded`, a retryable :class:`~dynconf.errors.RemoteError`, so the follower
backs off and its next read takes the newest document (latest wins; no change is lost, only
read later). The accounts live in one process-wide :class:`CallLedger` (:func:`ledger`), keyed by
store and endpoint, so every document an operator or node agent follows from one store shares
one bucket. Labels are bounded: the store's name, and the endpoint as ``scheme://host:port``
(:func:`endpoint_label`), never a credential, a path or a key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from dynconf.errors import AuthError, Origin, RemoteError, ThrottledError
from dynconf.stores import Absent, Fetched

if TYPE_CHECKING:
    from dynconf.stores import StoreSpec

__all__ = [
    "BUDGETS_ENV",
    "MAX_WAIT",
    "OUTCOMES",
    "RETRY_AFTER_CAP",
    "Budget",
    "BudgetExceeded",
    "CallLedger",
    "StoreCalls",
    "TokenBucket",
    "budgets_from_env",
    "endpoint_label",
    "ledger",
    "outcome_of",
    "parse_budget",
    "parse_budgets",
]

OUTCOMES: Final = ("ok", "not_found", "unauthorized", "throttled", "error", "budget")
"""The closed set of ``outcome`` label values."""
MAX_WAIT: Final = 10.0
"""Longest a call waits for the budget (or a store's Retry-After) before it is held back."""
RETRY_AFTER_CAP: Final = 60.0
"""Longest a store's ``Retry-After`` holds its next calls, whatever it asked for."""
LOG_EVERY: Final = 60.0
"""A store's budget hits are logged at most once per this many seconds."""

BUDGETS_ENV: Final = "DYNAMIC_CONFIG_STORE_BUDGETS"
"""The per-store budgets of a process that follows many documents (the operator, the node
agent): ``consul=10/20, vault=5``. The chart sets it from the installation's ``perStore``."""

_log = logging.getLogger("dynconf.budget")


@dataclass(frozen=True, slots=True)
class Budget:
    """Calls per second to one store and endpoint, and how many may go at once (the burst)."""

    rate: float
    burst: int

    def __str__(self) -> str:
        return f"{self.rate:g}/{self.burst}"


def parse_budget(text: str, where: str = "the store budget") -> Budget | None:
    """``"10"`` (10 per second, burst 10), ``"10/20"`` (burst 20), ``"off"`` or empty: none.

    Raises :class:`ValueError` with one sentence naming ``where`` and the form.
    """
    value = text.strip().lower()
    if value in ("", "off", "none", "unlimited"):
        return None
    rate_text, slash, burst_text = value.partition("/")
    form = 'the form is "RATE" or "RATE/BURST" (requests per second, e.g. 10/20), or "off"'
    try:
        rate = float(rate_text)
        burst = int(burst_text) if slash else 0
    except ValueError:
        raise ValueError(f"{where} is not a budget; {form}") from None
    if not 0 < rate < float("inf") or (slash and burst < 1):
        raise ValueError(f"{where} needs a rate above zero and a burst of at least 1; {form}")
    burst = burst if slash else max(1, int(rate))
    return Budget(rate, burst)


def parse_budgets(text: str, where: str) -> dict[str, Budget]:
    """Per-store budgets: ``"consul=10/20, vault=5"`` (a process that serves many stores)."""
    out: dict[str, Budget] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        store, equals, value = entry.partition("=")
        store = store.strip()
        if not equals or not store:
            raise ValueError(f"{where}: {entry.strip()!r} is not store=RATE[/BURST]")
        budget = parse_budget(value, f"{where}'s {store}")
        if budget is not None:
            out[store] = budget
    return out


def endpoint_label(endpoint: str) -> str:
    """An endpoint as a label: ``scheme://host:port`` of its first address, nothing else.

    A password, a path, a query or a second address of a list never becomes a label; an
    scp-like git address (``git@host:org/repo``) is ``ssh://host``.
    """
    first = endpoint.split(",", maxsplit=1)[0].strip()
    if not first:
        return ""
    if "://" not in first:
        if "@" in first and ":" in first.split("@", 1)[1]:
            return "ssh://" + first.split("@", 1)[1].split(":", 1)[0].lower()
        first = "//" + first
    try:
        parts = urlsplit(first)
        port = parts.port
    except ValueError:
        return "unparsable"
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    scheme = f"{parts.scheme.lower()}://" if parts.scheme else ""
    return f"{scheme}{host}:{port}" if port else f"{scheme}{host}"


def outcome_of(result: Fetched | Absent | BaseException) -> str:
    """The outcome label of one call: its answer, or the kind of error it raised."""
    if isinstance(result, Fetched):
        return "ok"
    if isinstance(result, Absent):
        return "not_found"
    if isinstance(result, BudgetExceeded):
        return "budget"
    if isinstance(result, ThrottledError):
        return "throttled"
    if isinstance(result, AuthError):
        return "unauthorized"
    return "error"


class BudgetExceeded(RemoteError):
    """A call the budget held back: the store's budget (or its Retry-After) would have made it
    wait past :data:`MAX_WAIT`. Retryable; nothing was sent."""


class TokenBucket:
    """A token bucket over an injected clock: ``rate`` tokens a second, at most ``burst`` held.

    :meth:`reserve` books the next call and answers how long it must wait first (callers that
    arrive together queue in order); without a budget it answers 0, except while a store's
    Retry-After holds it (:meth:`hold`).
    """

    def __init__(
        self, budget: Budget | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._budget = budget
        self._tokens = float(budget.burst) if budget else 0.0
        self._at = clock()
        self._not_before = 0.0

    @property
    def budget(self) -> Budget | None:
        return self._budget

    def configure(self, budget: Budget | None) -> None:
        """Take another budget (full bucket); the hold of a Retry-After stays."""
        with self._lock:
            self._budget = budget
            self._tokens = float(budget.burst) if budget else 0.0
            self._at = self._clock()

    def hold(self, seconds: float) -> None:
        """No call starts within ``seconds`` from now (a store's Retry-After)."""
        with self._lock:
            self._not_before = max(self._not_before, self._clock() + max(0.0, seconds))

    def reserve(self, max_wait: float = MAX_WAIT) -> float | None:
        """Seconds to wait before the call may start, booked; ``None``: past ``max_wait``,
        not booked (the call is held back)."""
        with self._lock:
            now = self._clock()
            held = max(0.0, self._not_before - now)
            budget = self._budget
            if budget is None:
                return held if held <= max_wait else None
            self._tokens = min(float(budget.burst), self._tokens + (now - self._at) * budget.rate)
            self._at = now
            wait = max(held, (1.0 - self._tokens) / budget.rate if self._tokens < 1.0 else 0.0)
            if wait > max_wait:
                return None
            self._tokens -= 1.0
            return wait


class StoreCalls:
    """The calls to one store at one endpoint: their counts, their bucket, their log line."""

    def __init__(
        self,
        store: str,
        endpoint: str,
        budget: Budget | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_wait: float = MAX_WAIT,
    ) -> None:
        self.store = store
        self.endpoint = endpoint
        self.bucket = TokenBucket(budget, clock=clock)
        self.max_wait = max_wait
        self._clock = clock
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(OUTCOMES, 0)
        self._logged_at: float | None = None
        self._hits_unlogged = 0

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def count(self, outcome: str) -> None:
        with self._lock:
            self._counts[outcome] += 1

    # ------------------------------------------------------------------ admission
    def admit(self) -> float:
        """Book the coming call: the seconds it must wait first (0: go now).

        Raises :class:`BudgetExceeded` when the wait would pass ``max_wait``; a wait or a
        refusal is counted as ``budget`` and logged at most once per :data:`LOG_EVERY`.
        """
        wait = self.bucket.reserve(self.max_wait)
        if wait is not None and wait <= 0.0:
            return 0.0
        self.count("budget")
        self._note_hit(held_back=wait is None)
        if wait is None:
            raise BudgetExceeded(
                f"the call budget of {self.store} at {self.endpoint or 'its endpoint'} would "
                f"make this read wait over {self.max_wait:g} s, so it was not sent; it is "
                "retried on the follower's backoff (raise the store's budget if this persists)",
                origin=Origin.remote(f"{self.store} {self.endpoint}".strip()),
            )
        return wait

    def admit_blocking(self) -> None:
        """:meth:`admit`, waiting in this (worker) thread."""
        wait = self.admit()
        if wait:
            time.sleep(wait)

    async def admit_async(self) -> None:
        """:meth:`admit`, waiting on the event loop."""
        import anyio

        wait = self.admit()
        if wait:
            await anyio.sleep(wait)

    def _note_hit(self, *, held_back: bool) -> None:
        now = self._clock()
        with self._lock:
            self._hits_unlogged += 1
            if self._logged_at is not None and now - self._logged_at < LOG_EVERY:
                return
            self._logged_at, hits, self._hits_unlogged = now, self._hits_unlogged, 0
        budget = self.bucket.budget
        _log.warning(
            "store_budget_hit",
            extra={
                "store": self.store,
                "endpoint": self.endpoint,
                "budget": str(budget) if budget else "off",
                "hits": hits,
                "held_back": held_back,
            },
        )

    # ------------------------------------------------------------------ results
    def record(self, result: Fetched | Absent | BaseException) -> None:
        """Count one call's result; a throttled answer's Retry-After holds the next calls."""
        outcome = outcome_of(result)
        if outcome == "budget":
            return  # counted when admission held it back; nothing was sent
        self.count(outcome)
        if isinstance(result, ThrottledError) and result.retry_after:
            self.bucket.hold(min(result.retry_after, RETRY_AFTER_CAP))


class CallLedger:
    """Every :class:`StoreCalls` of a process, by store and endpoint label, and the budgets."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._accounts: dict[tuple[str, str], StoreCalls] = {}
        self._budgets: dict[str, Budget] = {}

    def configure(self, budgets: Mapping[str, Budget]) -> None:
        """Per-store budgets for this process (a store left out: unlimited)."""
        with self._lock:
            self._budgets = dict(budgets)
            for (store, _), calls in self._accounts.items():
                calls.bucket.configure(self._budgets.get(store))

    def budget(self, store: str) -> Budget | None:
        return self._budgets.get(store)

    def account(self, store: str, endpoint: str = "") -> StoreCalls:
        """The one account of ``store`` at ``endpoint`` (any spelling; labelled here)."""
        label = endpoint_label(endpoint)
        with self._lock:
            calls = self._accounts.get((store, label))
            if calls is None:
                calls = StoreCalls(store, label, self._budgets.get(store), clock=self._clock)
                self._accounts[(store, label)] = calls
            return calls

    def for_spec(self, spec: StoreSpec) -> StoreCalls:
        return self.account(spec.source, spec.endpoint)

    def accounts(self) -> Iterator[StoreCalls]:
        with self._lock:
            yield from list(self._accounts.values())

    def samples(self) -> Iterator[tuple[str, str, str, int]]:
        """``(store, endpoint, outcome, count)`` of every outcome that happened."""
        for calls in self.accounts():
            for outcome, count in calls.counts().items():
                if count:
                    yield calls.store, calls.endpoint, outcome, count


def budgets_from_env(env: Mapping[str, str]) -> dict[str, Budget]:
    """The budgets :data:`BUDGETS_ENV` names (none when unset); :class:`ValueError` names it."""
    return parse_budgets(env.get(BUDGETS_ENV, ""), BUDGETS_ENV)


_LEDGER = CallLedger()


def ledger() -> CallLedger:
    """The process's ledger: one account per store and endpoint, whoever calls."""
    return _LEDGER
