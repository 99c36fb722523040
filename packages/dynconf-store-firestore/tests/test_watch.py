"""The push watch: a snapshot listener on the document, update time as revision, ABSENT on delete."""

from __future__ import annotations

import json
import time

import pytest

from dynconf.stores import ABSENT, Fetched, WatchCapability

pytestmark = pytest.mark.firestore


def test_capability_is_push(make_source, doc_path):
    assert make_source(doc_path).capability is WatchCapability.PUSH


def test_change_is_delivered_with_its_update_time(firestore_server, make_source, watcher, doc_path):
    ref = firestore_server.client.document(doc_path)
    ref.set({"v": 1})
    source = make_source(doc_path)
    first = source.fetch()
    watch = watcher(source)
    watch.wait_connected()
    written = ref.set({"v": 2})
    delivered = watch.next()
    assert isinstance(delivered, Fetched)
    assert json.loads(delivered.text) == {"v": 2}
    assert delivered.revision == written.update_time.rfc3339()
    assert delivered.revision > first.revision


def test_starting_value_is_not_announced(firestore_server, make_source, watcher, doc_path):
    firestore_server.client.document(doc_path).set({"v": 1})
    watch = watcher(make_source(doc_path))
    watch.wait_connected()
    assert watch.quiet(1.5)


def test_identical_rewrite_is_not_delivered(firestore_server, make_source, watcher, doc_path):
    ref = firestore_server.client.document(doc_path)
    ref.set({"v": 1})
    watch = watcher(make_source(doc_path))
    watch.wait_connected()
    ref.set({"v": 1})
    assert watch.quiet(1.0)
    ref.set({"v": 3})
    assert json.loads(watch.next().text) == {"v": 3}


def test_deleted_document_is_delivered_once_as_absent_then_its_return(
    firestore_server, make_source, watcher, doc_path
):
    ref = firestore_server.client.document(doc_path)
    ref.set({"v": 1})
    watch = watcher(make_source(doc_path))
    watch.wait_connected()
    ref.delete()
    assert watch.next() is ABSENT
    ref.delete()
    assert watch.quiet(1.0)
    ref.set({"v": 2})
    assert json.loads(watch.next().text) == {"v": 2}


def test_watch_of_a_missing_document_delivers_its_creation(
    firestore_server, make_source, watcher, doc_path
):
    watch = watcher(make_source(doc_path))
    watch.wait_connected()
    firestore_server.client.document(doc_path).set({"born": True})
    assert json.loads(watch.next().text) == {"born": True}


def test_burst_of_changes_ends_on_the_last_value(firestore_server, make_source, watcher, doc_path):
    ref = firestore_server.client.document(doc_path)
    ref.set({"n": 0})
    watch = watcher(make_source(doc_path))
    watch.wait_connected()
    for n in range(1, 11):
        ref.set({"n": n})
    seen: list[int] = []
    while not seen or seen[-1] != 10:
        seen.append(json.loads(watch.next().text)["n"])
    assert seen == sorted(seen), "a delivery was older than one before it"


def test_stop_ends_the_watch_promptly(firestore_server, make_source, watcher, doc_path):
    firestore_server.client.document(doc_path).set({})
    watch = watcher(make_source(doc_path))
    watch.wait_connected()
    started = time.monotonic()
    watch.stop()
    assert time.monotonic() - started < 2.0
