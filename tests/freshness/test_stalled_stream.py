"""A push watch whose connection stays open and forwards nothing is caught by a resync.

For every push store (consul blocking queries, the etcd watch stream, redis keyspace
notifications, the NATS KV watcher, the firestore listener, the config server's /stream),
the real agent follows the store's real server through a relay (``tests/fixtures/relay.py``)
that plays the fault no real server produces: a path that drops everything without closing.

a. v1 renders; a second write reaches the file through the watch itself (a delivery), so
   the stream that is stalled next is known to be live;
b. ``stall()``: the open watch forwards nothing, new connections pass. A write reaches the
   file within :data:`BOUND` by a resync over a connection of its own; the resync that found
   what the watch never delivered logs ``watch_stalled`` and reopens the watch;
c. ``blackhole()``: nothing can be read. ``staleness_seconds`` only grows, past
   ``2 * WATCH`` (no stream's "connected" restarts it), the failing resyncs are counted as
   render failures, and ``/readyz`` answers 503 once past ``--max-staleness`` (as
   docs/behaviour.md says);
d. ``restore()``: a write reaches the file within :data:`BOUND`, staleness is back under
   ``2 * WATCH`` and ``/readyz`` answers 200 again.

The write-to-file seconds of b and d are recorded as test properties.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.eventually import eventually
from tests.fixtures.relay import Relay

from .support import (
    BOUND,
    MAX_STALENESS,
    START,
    WATCH,
    Start,
    holds,
    last_text,
    start_agent,
    write_and_time,
)

PUSH_STORES = [
    pytest.param("consul", marks=pytest.mark.consul),
    pytest.param("etcd", marks=pytest.mark.etcd),
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("nats", marks=pytest.mark.nats),
    pytest.param("firestore", marks=pytest.mark.firestore),
    pytest.param("configserver", marks=pytest.mark.configserver),
]

pytestmark = pytest.mark.slow


@pytest.fixture(params=PUSH_STORES)
def store(request: pytest.FixtureRequest) -> Any:
    """One push store's harness (the agent tests' fixture of that name)."""
    return request.getfixturevalue(request.param)


def counts(process: Any) -> dict[str, float]:
    samples: dict[str, float] = process.scrape()
    return {
        name.removeprefix("dynamic_config_agent_"): value
        for name, value in samples.items()
        if name.startswith("dynamic_config_agent_")
    }


def test_a_stalled_then_black_holed_watch_is_caught_by_resyncs_and_staleness_tells(
    agent: Start,
    store: Any,
    tmp_path: Path,
    cut_proxy: Callable[[str, int], Relay],
    record_property: Callable[[str, object], None],
) -> None:
    relay = cut_proxy(store.host, store.port)
    out = tmp_path / "app.json"

    # a. v1, then a change the live watch delivers
    store.put({"v": 1})
    process = start_agent(agent, store, relay, out)
    assert eventually(holds(out, 1), START), f"v1 never rendered: {last_text(out)!r}"
    assert eventually(lambda: process.get("/readyz")[0] == 200, 5), "/readyz never 200"
    assert eventually(lambda: counts(process)["watch_connected"] == 1, START), "no watch"
    # a write just after the watch opens can be found first by the catch-up read, which is
    # not a delivery: write again until one is
    for attempt in ("1b", "1c", "1d"):
        delivered = counts(process)["deliveries_total"]
        took = write_and_time(store, out, attempt, BOUND)
        assert took is not None, f"the live watch's change never rendered: {last_text(out)!r}"
        if eventually(lambda n=delivered: counts(process)["deliveries_total"] > n, 5):
            break
    else:
        pytest.fail("no change before the stall was the watch's delivery: no live stream to stall")

    # b. the open watch forwards nothing; a resync over its own connection finds the write
    before = counts(process)
    stalls = len(process.events("watch_stalled"))
    relay.stall()
    took_b = write_and_time(store, out, 2, BOUND)
    record_property("stalled_write_to_file_seconds", took_b)
    assert took_b is not None, (
        f"{store.name}: with the watch stalled, v2 was not in the file within {BOUND} s "
        f"(file {last_text(out)!r}, metrics {counts(process)})"
    )
    after = counts(process)
    assert after["resyncs_total"] > before["resyncs_total"]
    assert eventually(lambda: len(process.events("watch_stalled")) > stalls, 5), (
        f"{store.name}: a resync found v2, which the stalled watch never delivered, and no "
        "watch_stalled was logged"
    )
    assert counts(process)["watch_reconnects_total"] > before["watch_reconnects_total"]

    # c. nothing can be read: staleness only grows, failing reads count, readiness drops
    failures = counts(process)["render_failures_total"]
    relay.blackhole()
    began = time.monotonic()
    seen: list[float] = []
    while time.monotonic() - began < 3 * WATCH:
        seen.append(counts(process)["staleness_seconds"])
        time.sleep(0.25)  # lets the time pass: staleness is what is being watched grow
    assert seen == sorted(seen), f"{store.name}: staleness went back while black-holed: {seen}"
    assert seen[-1] >= 2 * WATCH, f"{store.name}: staleness after {3 * WATCH} s: {seen}"
    assert eventually(lambda: counts(process)["render_failures_total"] > failures, 10), (
        f"{store.name}: no failed resync counted while black-holed"
    )
    assert process.get("/readyz")[0] == 503, "past --max-staleness /readyz must answer 503"

    # d. new connections pass again: the next write is read within the bound
    relay.restore()
    took_d = write_and_time(store, out, 3, BOUND)
    record_property("restored_write_to_file_seconds", took_d)
    assert took_d is not None, (
        f"{store.name}: after restore, v3 was not in the file within {BOUND} s "
        f"(file {last_text(out)!r}, metrics {counts(process)})"
    )
    assert eventually(lambda: counts(process)["staleness_seconds"] < 2 * WATCH, 2), (
        f"{store.name}: staleness stayed {counts(process)['staleness_seconds']} after restore"
    )
    assert eventually(lambda: process.get("/readyz")[0] == 200, MAX_STALENESS), (
        "/readyz did not come back"
    )
    print(f"{store.name}: stalled write->file {took_b} s, restored write->file {took_d} s")
    assert process.proc.poll() is None
