"""The push watch: blocking queries on the key, the index as revision, ABSENT on delete."""

from __future__ import annotations

import time
import uuid

import pytest

from dynconf.errors import AuthError
from dynconf.stores import ABSENT, Fetched, WatchCapability

pytestmark = pytest.mark.consul

FAST = {"wait": "2s"}
"""A short blocking wait so stopping a watch in a test takes at most ~2 s."""


def _key() -> str:
    return f"watch/{uuid.uuid4().hex}/config.json"


def test_capability_is_push(plain_consul, make_source):
    assert make_source(plain_consul.url, _key()).capability is WatchCapability.PUSH


def test_change_is_delivered_with_a_higher_index(plain_consul, make_source, watcher):
    key = _key()
    plain_consul.put(key, '{"v": 1}')
    source = make_source(plain_consul.url, key, extra=FAST)
    first = source.fetch()
    watch = watcher(source)
    watch.wait_connected()
    plain_consul.put(key, '{"v": 2}')
    delivered = watch.next()
    assert isinstance(delivered, Fetched)
    assert delivered.text == '{"v": 2}'
    assert delivered.numeric_revision > first.numeric_revision


def test_starting_value_is_not_announced(plain_consul, make_source, watcher):
    key = _key()
    plain_consul.put(key, '{"v": 1}')
    watch = watcher(make_source(plain_consul.url, key, extra=FAST))
    watch.wait_connected()
    assert watch.quiet(2.5)


def test_identical_rewrite_is_not_delivered(plain_consul, make_source, watcher):
    key = _key()
    plain_consul.put(key, '{"v": 1}')
    watch = watcher(make_source(plain_consul.url, key, extra=FAST))
    watch.wait_connected()
    plain_consul.put(key, '{"v": 1}')
    assert watch.quiet(1.5)
    plain_consul.put(key, '{"v": 3}')
    assert watch.next().text == '{"v": 3}'


def test_deleted_key_is_delivered_once_as_absent_then_its_return(
    plain_consul, make_source, watcher
):
    key = _key()
    plain_consul.put(key, '{"v": 1}')
    watch = watcher(make_source(plain_consul.url, key, extra=FAST))
    watch.wait_connected()
    plain_consul.delete(key)
    assert watch.next() is ABSENT
    other = f"watch/{uuid.uuid4().hex}/unrelated.json"
    plain_consul.put(other, "{}")  # moves the KV index; the key is still absent
    assert watch.quiet(1.0)
    plain_consul.put(key, '{"v": 2}')
    assert watch.next().text == '{"v": 2}'


def test_watch_of_a_missing_key_delivers_its_creation(plain_consul, make_source, watcher):
    key = _key()
    watch = watcher(make_source(plain_consul.url, key, extra=FAST))
    watch.wait_connected()
    plain_consul.put(key, '{"born": true}')
    assert watch.next().text == '{"born": true}'


def test_stop_ends_the_watch_within_the_blocking_wait(plain_consul, make_source, watcher):
    key = _key()
    plain_consul.put(key, "{}")
    watch = watcher(make_source(plain_consul.url, key, extra=FAST))
    watch.wait_connected()
    started = time.monotonic()
    watch.stop(timeout=10)
    assert time.monotonic() - started < 3.5


def test_burst_of_changes_ends_on_the_last_value(plain_consul, make_source, watcher):
    key = _key()
    plain_consul.put(key, '{"n": 0}')
    watch = watcher(make_source(plain_consul.url, key, extra=FAST))
    watch.wait_connected()
    for n in range(1, 11):
        plain_consul.put(key, f'{{"n": {n}}}')
    seen = []
    while not seen or seen[-1] != '{"n": 10}':
        seen.append(watch.next().text)
    numbers = [int(t.split(":")[1].strip(" }")) for t in seen]
    assert numbers == sorted(numbers), "a delivery was older than one before it"


def test_refused_credential_ends_the_watch_with_auth(acl_consul, make_source, watcher):
    key = _key()
    acl_consul.put(key, "{}")
    watch = watcher(make_source(acl_consul.url, key, extra=FAST))
    watch.thread.join(10)
    assert isinstance(watch.error, AuthError)


@pytest.mark.parametrize("settle", [0.0, 1.0], ids=["between-queries", "in-a-query"])
def test_close_ends_the_watch_at_once(plain_consul, make_source, watcher, settle):
    key = _key()
    plain_consul.put(key, "{}")
    source = make_source(plain_consul.url, key, extra={"wait": "60s"})
    watch = watcher(source)
    watch.wait_connected()
    time.sleep(settle)  # at 1 s the watch is parked in its 60 s blocking query
    started = time.monotonic()
    source.close()
    watch.thread.join(10)
    assert not watch.thread.is_alive()
    assert time.monotonic() - started < 2.0
    assert watch.error is None
    assert watch.failures == []
