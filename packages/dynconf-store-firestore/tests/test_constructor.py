"""``Firestore(project, collection/document, ...)``: the typed constructor on the emulator."""

from __future__ import annotations

from typing import Any

from dynconf import DynamicConfig
from dynconf_store_firestore import Firestore
from tests.fixtures.eventually import eventually


def test_firestore_constructor_loads_and_the_watch_sees_a_change(
    firestore_server: Any, doc_path: str
) -> None:
    firestore_server.client.document(doc_path).set({"app": {"v": 1}})
    source = Firestore(
        firestore_server.project, doc_path, auth="emulator", api_url=firestore_server.emulator_host
    )
    config = DynamicConfig(None, "app").remote(source)
    assert config.init()["v"] == 1
    watch = config.watch_remote(interval=0.5)
    try:
        firestore_server.client.document(doc_path).set({"app": {"v": 2}})
        assert eventually(lambda: config.current()["v"] == 2, timeout=15), config.current()["v"]
    finally:
        watch.stop()
        watch.join(15)
        source.close()
