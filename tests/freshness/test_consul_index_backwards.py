"""A Consul that answers every blocking query at once with an index that went backwards.

The fault the real server will not produce (``tests/fixtures/hostile.py``'s Listener plays
it): ``?index=100`` is answered at once with index 50, and the query from 0 that Consul's
rule then asks (an index that goes backwards resets it) is answered at once with 100 again,
so every other answer goes backwards and none waits. The agent must not spin on it (its
queries are counted on the fake: a handful a second at most, docs/behaviour.md's floor of
0.5 s between answers that bring nothing) and must still deliver the next real change, a
new index with a new value, within the bound.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.fixtures.eventually import eventually
from tests.fixtures.hostile import Listener, request_path

from .support import BOUND, START, WATCH, Start, holds, last_text

KEY = "app/config.json"
WINDOW = 3 * WATCH
"""Seconds the queries are counted over (a few resyncs' worth)."""
MOST_PER_SECOND = 5.0
"""Requests a second the fake may see in all: the watch's floor allows two, resyncs add
one every ``WATCH`` seconds."""

pytestmark = [pytest.mark.consul, pytest.mark.slow]


class BackwardsConsul:
    """The fake's state: what it holds, and how it answers a blocking query."""

    def __init__(self) -> None:
        self.index = 100
        self.value: object = 1
        self.changed = False
        self.lock = threading.Lock()
        self.listener = Listener("127.0.0.1", self.answer)

    def change(self, value: object, index: int) -> None:
        """A real change: from now on every query answers ``index`` with ``value``."""
        with self.lock:
            self.value, self.index, self.changed = value, index, True

    def blocking_queries(self, index: str = "") -> int:
        """Queries seen that carried ``index=`` (that exact value, when given)."""
        asked = f"index={index}".encode()
        return sum(1 for request in list(self.listener.seen) if asked in request.split()[1])

    def answer(self, request: bytes) -> bytes:
        target = urlsplit(request_path(request))
        if target.path != f"/v1/kv/{KEY}":
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        asked = parse_qs(target.query).get("index")
        with self.lock:
            index, value, changed = self.index, self.value, self.changed
        if asked is not None and not changed:
            index = 50 if int(asked[0]) >= 100 else 100  # backwards, then from 0 again
        body = json.dumps([{
            "Key": KEY, "Flags": 0, "CreateIndex": 10, "ModifyIndex": index, "LockIndex": 0,
            "Value": base64.b64encode(json.dumps({"v": value}).encode()).decode(),
        }]).encode()  # fmt: skip
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"X-Consul-Index: {index}\r\nX-Consul-Knownleader: true\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


@pytest.fixture
def backwards_consul() -> Iterator[BackwardsConsul]:
    fake = BackwardsConsul()
    try:
        yield fake
    finally:
        fake.listener.close()


def test_an_index_going_backwards_at_once_is_not_a_request_storm_and_a_change_still_lands(
    agent: Start, backwards_consul: BackwardsConsul, tmp_path: Path
) -> None:
    fake = backwards_consul
    out = tmp_path / "app.json"
    process = agent(
        "--source", "consul", "--endpoint", fake.listener.url, "--key", KEY, "--out", str(out),
        "--watch", str(WATCH), "--metrics-addr", "127.0.0.1:0",
    )  # fmt: skip
    assert eventually(holds(out, 1), START), f"v1 never rendered: {last_text(out)!r}"
    assert eventually(lambda: fake.blocking_queries() >= 2, 5), "the watch never queried"

    began, seen, queries = time.monotonic(), len(fake.listener.seen), fake.blocking_queries()
    time.sleep(WINDOW)  # lets the hostile answers come; the count over it is the check
    took = time.monotonic() - began
    rate = (len(fake.listener.seen) - seen) / took
    watch_rate = (fake.blocking_queries() - queries) / took
    assert rate <= MOST_PER_SECOND, f"{rate:.1f} requests/s over {took:.1f} s: a request storm"
    assert watch_rate >= 1 / WATCH, f"the watch stopped asking ({watch_rate:.2f} queries/s)"
    # the fault was met: answered 50 to ?index=100, and the watch started over from 0
    assert fake.blocking_queries("100&") >= 2 and fake.blocking_queries("0&") >= 2

    began = time.monotonic()
    fake.change(2, 200)
    assert eventually(holds(out, 2), BOUND, interval=0.02), (
        f"the change to index 200 never reached the file within {BOUND} s: {last_text(out)!r}"
    )
    print(
        f"backwards consul: {rate:.2f} requests/s ({watch_rate:.2f} blocking), "
        f"change->file {time.monotonic() - began:.3f} s"
    )
    assert process.proc.poll() is None
