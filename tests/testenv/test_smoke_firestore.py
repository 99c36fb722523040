"""The firestore_server fixture gives a working emulator: set, get and on_snapshot."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from tests.fixtures.servers import FirestoreServer

pytestmark = pytest.mark.firestore


def test_on_snapshot_sees_the_update(firestore_server: FirestoreServer) -> None:
    doc = firestore_server.client.collection("smoke").document(uuid.uuid4().hex)
    doc.set({"greeting": "hello"})
    assert doc.get().to_dict() == {"greeting": "hello"}

    seen: list[dict[str, Any]] = []
    changed = threading.Event()

    def on_snapshot(snapshots: list[Any], _changes: Any, _read_time: Any) -> None:
        for snapshot in snapshots:
            data = snapshot.to_dict() or {}
            seen.append(data)
            if data.get("greeting") == "bye":
                changed.set()

    watch = doc.on_snapshot(on_snapshot)
    try:
        doc.update({"greeting": "bye"})
        assert changed.wait(10), f"no snapshot with the update; saw {seen}"
    finally:
        watch.unsubscribe()
