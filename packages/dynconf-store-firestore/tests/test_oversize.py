"""A document past the ceiling is refused before it is converted (Firestore bounds a read at
1 MiB); a watch reports it and delivers the next document that fits."""

from __future__ import annotations

import json
import time

import pytest

from dynconf.errors import OversizeError
from dynconf.stores import Fetched
from dynconf_store_firestore.convert import text_size_floor

pytestmark = pytest.mark.firestore

CEILING = 64 * 1024
VALUE_BYTES = 512 * 1024
"""Past the ceiling and within Firestore's 1 MiB document limit."""


def test_document_past_the_ceiling_is_refused(firestore_server, make_source, doc_path):
    firestore_server.client.document(doc_path).set({"v": "x" * VALUE_BYTES})
    with pytest.raises(OversizeError) as refused:
        make_source(doc_path, max_bytes=CEILING).fetch()
    assert f"past the {CEILING}-byte ceiling" in refused.value.message
    assert "xxxx" not in refused.value.message


def test_document_just_under_the_ceiling_still_reads(firestore_server, make_source, doc_path):
    fields = {"v": "x" * (CEILING - 16)}
    firestore_server.client.document(doc_path).set(fields)
    answer = make_source(doc_path, max_bytes=CEILING).fetch()
    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == fields
    assert len(answer.text.encode()) <= CEILING


def test_size_floor_never_passes_the_text_it_bounds():
    fields = {
        "name": "billing",
        "port": 8080,
        "on": True,
        "none": None,
        "blob": b"\x00\x01\xfe",
        "list": [1, "two", {"three": 3.5}],
        "nested": {"deep": {"é": "ü" * 10}},
    }
    from dynconf_store_firestore.convert import plain_document

    text = json.dumps(plain_document(fields), sort_keys=True, ensure_ascii=False)
    assert text_size_floor(fields) <= len(text.encode("utf-8"))


def test_watched_document_past_the_ceiling_is_reported_and_the_watch_goes_on(
    firestore_server, make_source, doc_path, watcher
):
    document = firestore_server.client.document(doc_path)
    document.set({"v": 0})
    watch = watcher(make_source(doc_path, max_bytes=CEILING))
    watch.wait_connected()
    document.set({"v": "x" * VALUE_BYTES})
    deadline = time.monotonic() + 15
    while not any(isinstance(f, OversizeError) for f in watch.failures):
        assert watch.error is None, watch.error
        assert time.monotonic() < deadline, "the oversize document was not reported"
        time.sleep(0.05)
    document.set({"v": 2})
    answer = watch.next()
    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == {"v": 2}
    watch.stop()
