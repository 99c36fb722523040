"""Faults: the emulator restarted under a live listener; no credential in errors or logs."""

from __future__ import annotations

import json
import logging
import socket

import pytest

from dynconf.errors import DynconfError
from dynconf.stores import ABSENT, StoreSpec
from dynconf_store_firestore.plugin import FIRESTORE_STORE

pytestmark = [pytest.mark.firestore, pytest.mark.slow]

PROJECT = "demo-faults"
PATH = "config/restarted"


def test_emulator_restarted_mid_watch_recovers_and_delivers(own_emulator, make_source, watcher):
    seed = own_emulator.client(PROJECT)
    seed.document(PATH).set({"v": 1})
    seed.close()
    source = make_source(PATH, host=own_emulator.host, project=PROJECT)
    watch = watcher(source)
    watch.wait_connected()
    own_emulator.kill()
    assert watch.quiet(2.0)  # nothing is invented while the emulator is gone
    assert watch.error is None
    own_emulator.start()  # same port; the emulator keeps data in memory, so it comes back empty
    assert watch.next(timeout=60) is ABSENT
    seed = own_emulator.client(PROJECT)
    try:
        seed.document(PATH).set({"v": 2})
    finally:
        seed.close()
    assert json.loads(watch.next(timeout=30).text) == {"v": 2}
    assert watch.error is None


def test_access_token_never_appears_in_errors_or_logs(caplog):
    secret = "ya29.planted-secret-token-value"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = FIRESTORE_STORE.build(StoreSpec.from_inputs(
        source="firestore", endpoint="demo-secret", key="config/app", auth="access-token",
        token=secret, api_url=f"https://127.0.0.1:{port}", timeout=2.0,
    ))  # fmt: skip
    caplog.set_level(logging.DEBUG)
    with pytest.raises(DynconfError) as caught:
        source.fetch()
    source.close()
    assert caught.value.kind == "remote"
    for text in (str(caught.value), repr(caught.value), caplog.text, source.describe()):
        assert secret not in text


def test_resource_exhausted_is_a_throttle_not_a_plain_failure(make_source):
    """RESOURCE_EXHAUSTED (a quota; the emulator never sends it, so the client's own exception
    stands in) is a ThrottledError, which the call budget backs off on."""
    from google.api_core.exceptions import ResourceExhausted

    from dynconf.errors import ThrottledError

    source = make_source("configs/app")
    classified = source._classify(ResourceExhausted("quota exceeded"))
    assert isinstance(classified, ThrottledError)
    assert "RESOURCE_EXHAUSTED" in classified.message
