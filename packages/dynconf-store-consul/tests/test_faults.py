"""Faults against real agents: killed and restarted mid-watch, cut off, rebuilt from scratch."""

from __future__ import annotations

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import ABSENT, Fetched

pytestmark = [pytest.mark.consul, pytest.mark.slow]

KEY = "faults/app/config.json"
FAST = {"wait": "2s"}


def test_agent_killed_and_restarted_mid_watch(own_consul, make_source, watcher):
    own_consul.put(KEY, '{"v": 1}')
    source = make_source(own_consul.url, KEY, extra=FAST, timeout=2.0)
    source._retry_wait = 0.5  # the fixed 5 s pause, shortened to keep the test quick
    watch = watcher(source)
    watch.wait_connected()
    own_consul.kill()
    while not watch.failures:  # reports while the agent is down
        assert watch.error is None
        watch.quiet(0.1)
    assert isinstance(watch.failures[0], RemoteError)
    assert source.connected is False
    own_consul.start()  # same ports, same data directory: the index carries on
    watch.wait_connected(timeout=30)
    own_consul.put(KEY, '{"v": 2}')
    delivered = watch.next(timeout=15)
    assert isinstance(delivered, Fetched)
    assert delivered.text == '{"v": 2}'
    assert watch.error is None


def test_change_made_while_unreachable_is_delivered_after(own_consul, cut_proxy, make_source,
                                                          watcher):  # fmt: skip
    own_consul.put(KEY, '{"v": 1}')
    source = make_source(cut_proxy.url, KEY, extra=FAST, timeout=2.0)
    source._retry_wait = 0.5
    watch = watcher(source)
    watch.wait_connected()
    cut_proxy.cut()
    while not watch.failures:
        watch.quiet(0.1)
    own_consul.put(KEY, '{"v": "written while cut off"}')
    assert watch.quiet(1.0)  # nothing can arrive while the path is cut
    cut_proxy.restore()
    delivered = watch.next(timeout=15)
    assert delivered.text == '{"v": "written while cut off"}'


def test_failed_query_waits_the_fixed_retry_pause(own_consul, cut_proxy, make_source, watcher):
    import time

    own_consul.put(KEY, "{}")
    source = make_source(cut_proxy.url, KEY, extra=FAST, timeout=2.0)
    watch = watcher(source)
    watch.wait_connected()
    cut_proxy.cut()
    while len(watch.failures) < 1:
        watch.quiet(0.05)
    first = time.monotonic()
    while len(watch.failures) < 2:
        watch.quiet(0.05)
    assert 4.5 <= time.monotonic() - first <= 7.0


def test_index_going_backwards_resets_and_delivers(dev_consul, make_source, watcher):
    # A dev agent keeps everything in memory: a restart rebuilds the state from index 1,
    # which is what a restored snapshot or a rebuilt cluster looks like to a watcher.
    for n in range(30):  # push the index well above where a fresh agent starts
        dev_consul.put(f"faults/filler/{n}", "x")
    dev_consul.put(KEY, '{"v": 1}')
    source = make_source(dev_consul.url, KEY, extra=FAST, timeout=2.0)
    source._retry_wait = 0.5
    before = source.fetch().numeric_revision
    watch = watcher(source)
    watch.wait_connected()
    dev_consul.kill()
    while not watch.failures:
        watch.quiet(0.1)
    dev_consul.start()
    assert watch.next(timeout=15) is ABSENT  # the rebuilt agent has no such key
    dev_consul.put(KEY, '{"v": "after rebuild"}')
    delivered = watch.next(timeout=15)
    assert delivered.text == '{"v": "after rebuild"}'
    assert delivered.numeric_revision < before
