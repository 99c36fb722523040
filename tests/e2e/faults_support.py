"""The fault ladder's invariant checker: what every pod consuming a document must hold to,
whatever is done to its store.

A document carries its generation (``{"gen": N, ...}``); each write of it is recorded
(:meth:`FileInvariants.record_write`, or :meth:`FileInvariants.write`, which also puts it).
Each consuming pod's ``app`` container is a reader (:func:`reader`): every 200 ms it prints the
published file, one line, to its log; :meth:`FileInvariants.observe` follows that log through
the apiserver (with the kubelet's timestamps, so when a line was printed is the container's
clock, not when the test got it). :meth:`FileInvariants.check` then holds the leg to:

(a) **fresh or reported**: every pod's file reaches the newest written generation within the
    bound (about 2 * ``watch-seconds`` plus slack), or the pod's ``staleness_seconds`` (scraped
    through the apiserver's pod proxy) says it is stale: at least the bound;
(b) **never torn, never back**: no reader ever saw the file missing, empty, unparseable, past
    the reader's size window, or holding a generation older than one it had already seen.

``check`` raises on a violation of either and returns a :class:`Verdict` per pod, on which a
leg asserts what it expects on top (every pod converged; every pod stale and reporting it).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import math
import re
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from kubernetes import client  # type: ignore[import-untyped]

from tests.e2e.opnode_support import pod_metrics

__all__ = [
    "AGENT_METRICS", "FileInvariants", "Sighting", "Verdict", "agent_metrics", "broken", "parse",
    "reader", "streaming_core",
]  # fmt: skip

AGENT_METRICS: Final = 9110
"""The chart's fleet default ``metrics-port``."""
WINDOW: Final = 64 * 1024
"""Bytes the reader prints a file up to; a larger one is reported by its size only."""
PERIOD: Final = 0.2

_LOOP: Final = f"""\
while :; do
  n=$(wc -c 2>/dev/null < "$f" || echo missing)
  if [ "$n" = missing ]; then echo missing
  elif [ "$n" -gt {WINDOW} ]; then echo "big $n"
  else printf 'doc %s\\n' "$(tr -d '\\n' < "$f")"
  fi
  sleep {PERIOD}
done
"""


def reader(path: str) -> str:
    """The ``app`` container's script (busybox ``sh -c``) for the file at ``path``: one line
    every 200 ms — ``doc <the file with its newlines removed>`` (JSON stays JSON),
    ``missing``, or ``big <bytes>`` past :data:`WINDOW`."""
    return f"f={shlex.quote(path)}\n{_LOOP}"


def streaming_core(api_client: Any, stack: contextlib.ExitStack, *, connections: int = 96) -> Any:
    """A ``CoreV1Api`` of its own for the readers' log streams, closed with ``stack``: each
    followed log holds a connection, and the shared client's pool keeps ten."""
    configuration = copy.copy(api_client.configuration)
    configuration.connection_pool_maxsize = connections
    own = client.ApiClient(configuration)
    stack.callback(own.close)
    return client.CoreV1Api(own)


def agent_metrics(core: Any, namespace: str, pod: str) -> dict[str, float]:
    """The pod's ``dynamic_config_agent_*`` samples, through the apiserver's pod proxy."""
    return pod_metrics(core, namespace, pod, AGENT_METRICS, "dynamic_config_agent_")


@dataclass(frozen=True)
class Sighting:
    """One reader line: when it was printed (unix seconds), the generation, or the problem."""

    at: float
    gen: int | None
    problem: str | None = None


@dataclass(frozen=True)
class Verdict:
    """One pod against the newest write (``gen``, written at ``written``, unix seconds)."""

    pod: str
    gen: int
    written: float
    took: float | None
    """Seconds from the write to the reader's first line showing ``gen`` or newer (None: not
    by the check)."""
    fresh: bool
    """The file showed ``gen`` within the bound."""
    staleness: float | None
    """``staleness_seconds``, scraped by the check when the pod had not shown ``gen`` within
    the bound (else None)."""
    last_gen: int | None
    """The newest generation the reader had shown by the check."""


def parse(line: str) -> Sighting | None:
    """A log line (``<RFC 3339 nano> <reader line>``) as a sighting; None if not the reader's."""
    stamp, _, text = line.partition(" ")
    try:
        at = _unix(stamp)
    except ValueError:
        return None
    word, _, rest = text.partition(" ")
    if word == "missing":
        return Sighting(at, None, "the file is missing")
    if word == "big":
        return Sighting(at, None, f"the file holds {rest} bytes (past {WINDOW})")
    if word != "doc":
        return None
    if not rest.strip():
        return Sighting(at, None, "the file is empty")
    try:
        document = json.loads(rest)
        gen = document["gen"]
    except (ValueError, KeyError, TypeError):
        return Sighting(at, None, f"the file is not a whole document: {rest[:120]!r}")
    if not isinstance(gen, int):
        return Sighting(at, None, f"the file's gen is not a number: {gen!r}")
    return Sighting(at, gen)


_STAMP: Final = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")


def _unix(stamp: str) -> float:
    """An RFC 3339 stamp (``2026-12-07T06:40:00.123456789Z``) as unix seconds.

    The kubelet passes on the runtime's stamp, written in the runtime's local zone: ``Z`` or
    an offset (``+01:00``) are both read; nanoseconds are cut to microseconds."""
    match = _STAMP.fullmatch(stamp)
    if match is None:
        raise ValueError(stamp)
    whole, fraction, zone = match.groups()
    moment = dt.datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    return moment.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)


@dataclass
class _Follow:
    """One pod's reader log, followed in a thread until :meth:`stop`."""

    core: Any
    namespace: str
    pod: str
    container: str = "app"
    sightings: list[Sighting] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    """The last few log lines that were not the reader's (for a failure message)."""
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"reader-{self.pod}")
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(15)

    def newest(self) -> float:
        with self.lock:
            return self.sightings[-1].at if self.sightings else 0.0

    def snapshot(self) -> list[Sighting]:
        with self.lock:
            return list(self.sightings)

    def _run(self) -> None:
        """Follow the log (all of it at first); reopen a broken stream from just before its
        last line. The reader prints every 200 ms, so the stream wakes this thread often
        enough to see ``stopping``."""
        since: int | None = None
        while not self.stopping.is_set():
            try:
                self._stream(since)
            except Exception as error:  # reopened; kept for the failure message
                if self.stopping.is_set():
                    return
                self.errors.append(f"{type(error).__name__}: {str(error)[:200]}")
                self.stopping.wait(1)
            newest = self.newest()
            since = max(1, math.ceil(time.time() - newest) + 1) if newest else None

    def _stream(self, since: int | None) -> None:
        response = self.core.read_namespaced_pod_log(
            self.pod, self.namespace, container=self.container, follow=True, timestamps=True,
            _preload_content=False, _request_timeout=(10, 30),
            **({"since_seconds": since} if since else {}),
        )  # fmt: skip
        read = 0
        try:
            buffer = b""
            for chunk in response.stream(4096):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                read += len(lines)
                for raw in lines:
                    self._add(raw.decode(errors="replace"))
                if self.stopping.is_set():
                    return
        finally:
            response.release_conn()
        if not read:  # kept for the failure message: a stream that ends empty is reopened
            self.errors.append(f"the log stream (HTTP {response.status}) ended with no line")
            self.stopping.wait(1)

    def _add(self, line: str) -> None:
        sighting = parse(line)
        if sighting is None:
            with self.lock:
                self.unread[:] = [*self.unread[-2:], line[:160]]
            return
        with self.lock:
            if self.sightings and sighting.at <= self.sightings[-1].at:
                return  # a reopened stream repeats what was already seen
            self.sightings.append(sighting)


class FileInvariants:
    """One document, its writes, and the pods that consume it (the module docstring).

    ``bound`` is the seconds a pod has to show a write; ``put(gen)`` writes generation
    ``gen`` to the store (for :meth:`write`).
    """

    def __init__(
        self,
        core: Any,
        namespace: str,
        *,
        bound: float,
        put: Callable[[int], None] | None = None,
        name: str = "document",
    ) -> None:
        self.core, self.namespace, self.bound, self.put, self.name = (
            core, namespace, bound, put, name,
        )  # fmt: skip
        self.writes: list[tuple[int, float]] = []
        self.follows: dict[str, _Follow] = {}

    # ------------------------------------------------------------------ the API
    def record_write(self, gen: int, at: float | None = None) -> None:
        """Generation ``gen`` was written to the store at ``at`` (unix seconds; now)."""
        if self.writes:
            assert gen > self.writes[-1][0], f"{self.name}: gen {gen} after {self.writes[-1][0]}"
        self.writes.append((gen, time.time() if at is None else at))

    def write(self, gen: int | None = None) -> int:
        """Put the next generation (or ``gen``) through ``put`` and record it; the generation."""
        assert self.put is not None, f"{self.name}: no put to write with"
        gen = gen if gen is not None else (self.writes[-1][0] + 1 if self.writes else 1)
        at = time.time()
        self.put(gen)
        self.record_write(gen, at)
        return gen

    def observe(self, pod: str, container: str = "app") -> None:
        """Follow ``pod``'s reader (its ``container``, ``app`` unless named, runs
        :func:`reader`) from now on; a pod whose containers read several documents is
        observed by each document's checker through its own container."""
        assert pod not in self.follows, pod
        follow = _Follow(self.core, self.namespace, pod, container)
        self.follows[pod] = follow
        follow.start()

    def check(self) -> dict[str, Verdict]:
        """Hold every observed pod to (a) and (b) (the module docstring); a verdict per pod.

        Returns once each pod shows the newest write, or once its reader's lines cover that
        write's bound (and one second more: ``staleness_seconds`` is whole seconds), when its
        staleness is scraped. Call it within the bound of the newest write: a pod that shows
        it only later is judged by the staleness it reports at the check.
        """
        assert self.follows, f"{self.name}: no pod observed"
        verdicts = {}
        if self.writes:
            gen, written = self.writes[-1]
            for pod in self.follows:
                verdicts[pod] = self._judge(pod, gen, written)
        problems = self.violations()
        for v in verdicts.values():
            if v.fresh or (v.staleness is not None and v.staleness >= self.bound):
                continue
            shown = f"after {v.took:.1f} s" if v.took is not None else f"not yet ({v.last_gen})"
            problems.append(
                f"{v.pod}: gen {v.gen} not in the file within {self.bound:g} s (shown "
                f"{shown}), and staleness_seconds reads {v.staleness}, not past the bound"
            )
        assert not problems, f"{self.name}: " + "\n".join(problems)
        return verdicts

    # ------------------------------------------------------------------ the rules
    def violations(self) -> list[str]:
        """Rule (b) for every pod so far (:func:`broken`)."""
        return [
            f"{pod} {problem}"
            for pod, f in self.follows.items()
            for problem in broken(f.snapshot())
        ]

    def _judge(self, pod: str, gen: int, written: float) -> Verdict:
        follow = self.follows[pod]
        deadline = written + self.bound + 1
        # the lines arrive a little after they are printed: wait for them to cover the bound
        give_up = time.monotonic() + max(0.0, deadline - time.time()) + 30
        while True:
            reached = _first_at_least(follow.snapshot(), gen)
            if reached is not None and reached.at <= written + self.bound:
                return Verdict(pod, gen, written, reached.at - written, True, None, reached.gen)
            if reached is not None or follow.newest() > deadline:
                break
            assert time.monotonic() < give_up, (
                f"{self.name}: {pod}'s reader fell silent (last line at "
                f"{_clock(follow.newest())}; stream errors {follow.errors[-3:]}; lines not "
                f"the reader's {follow.unread})"
            )
            time.sleep(PERIOD)
        took = reached.at - written if reached is not None else None
        return Verdict(pod, gen, written, took, False, self.staleness(pod), self.shown(pod))

    def staleness(self, pod: str) -> float | None:
        """``staleness_seconds`` of ``pod``'s agent now (None if it does not answer)."""
        try:
            return agent_metrics(self.core, self.namespace, pod).get(
                "dynamic_config_agent_staleness_seconds"
            )
        except client.ApiException:
            return None

    def shown(self, pod: str) -> int | None:
        """The newest generation ``pod``'s reader has shown."""
        gens = [s.gen for s in self.follows[pod].snapshot() if s.gen is not None]
        return gens[-1] if gens else None

    def close(self) -> None:
        """Stop following (every reader thread joined)."""
        for follow in self.follows.values():
            follow.stop()


def broken(sightings: list[Sighting]) -> list[str]:
    """Rule (b) over one reader's lines: each a whole document, generations never back."""
    out = []
    best: Sighting | None = None
    for sighting in sightings:
        when = _clock(sighting.at)
        if sighting.gen is None:
            out.append(f"at {when}: {sighting.problem}")
        elif best is not None and best.gen is not None and sighting.gen < best.gen:
            out.append(f"at {when}: gen {sighting.gen} after gen {best.gen} (at {_clock(best.at)})")
        else:
            best = sighting
    return out


def _first_at_least(sightings: list[Sighting], gen: int) -> Sighting | None:
    return next((s for s in sightings if s.gen is not None and s.gen >= gen), None)


def _clock(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%H:%M:%S.%f")[:-3]
