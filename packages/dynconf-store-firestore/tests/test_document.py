"""Reading one document from the emulator: typed fields converted by their stated rules."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import ABSENT, Fetched

pytestmark = pytest.mark.firestore


def test_plain_fields_read_as_a_json_document(firestore_server, make_source, doc_path):
    firestore_server.client.document(doc_path).set(
        {"name": "billing", "port": 8080, "ratio": 0.5, "on": True, "none": None,
         "list": [1, "two", {"three": 3}], "nested": {"deep": {"x": 1}}}
    )  # fmt: skip
    answer = make_source(doc_path).fetch()
    assert isinstance(answer, Fetched)
    assert answer.format == "json"
    assert json.loads(answer.text) == {
        "name": "billing", "port": 8080, "ratio": 0.5, "on": True, "none": None,
        "list": [1, "two", {"three": 3}], "nested": {"deep": {"x": 1}},
    }  # fmt: skip


def test_typed_fields_follow_the_stated_rules(firestore_server, make_source, doc_path):
    from google.cloud.firestore_v1 import GeoPoint
    from google.cloud.firestore_v1.vector import Vector

    client = firestore_server.client
    stamp = dt.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)
    client.document(doc_path).set({
        "at": stamp,
        "blob": b"\x00\x01\xfe\xff",
        "ref": client.document("teams/platform"),
        "where": GeoPoint(52.52, 13.405),
        "embedding": Vector([0.25, 0.5]),
        "inf": float("inf"),
        "nan": float("nan"),
        "inside": {"when": stamp, "blobs": [b"a"]},
    })  # fmt: skip
    document = json.loads(make_source(doc_path).fetch().text)
    assert document["at"] == "2026-01-02T03:04:05.123456Z"
    assert base64.b64decode(document["blob"]) == b"\x00\x01\xfe\xff"
    assert document["ref"] == "teams/platform"
    assert document["where"] == {"latitude": 52.52, "longitude": 13.405}
    assert document["embedding"] == [0.25, 0.5]
    assert document["inf"] == "Infinity"
    assert document["nan"] == "NaN"
    assert document["inside"] == {"when": "2026-01-02T03:04:05.123456Z", "blobs": ["YQ=="]}


def test_revision_is_the_update_time(firestore_server, make_source, doc_path):
    result = firestore_server.client.document(doc_path).set({"v": 1})
    answer = make_source(doc_path).fetch()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", answer.revision)
    assert answer.revision == result.update_time.rfc3339()


def test_missing_document_is_absent(make_source, doc_path):
    assert make_source(doc_path).fetch() is ABSENT


def test_document_without_fields_is_an_empty_document(firestore_server, make_source, doc_path):
    firestore_server.client.document(doc_path).set({})
    assert make_source(doc_path).fetch().text == "{}"


def test_nested_document_path(firestore_server, make_source, doc_path):
    deep = f"environments/prod/{doc_path}"
    firestore_server.client.document(deep).set({"deep": True})
    assert json.loads(make_source(deep).fetch().text) == {"deep": True}


def test_named_database_is_read_from_the_endpoint(firestore_server, make_source, doc_path):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import firestore

    other = firestore.Client(project=firestore_server.project, database="eu-config",
                             credentials=AnonymousCredentials())  # fmt: skip
    try:
        other.document(doc_path).set({"db": "eu-config"})
        firestore_server.client.document(doc_path).set({"db": "(default)"})
        source = make_source(doc_path, project=f"{firestore_server.project}/eu-config")
        assert json.loads(source.fetch().text) == {"db": "eu-config"}
    finally:
        other.close()


def test_unreachable_emulator_is_a_prompt_remote_error(make_source, doc_path):
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = make_source(doc_path, host=f"127.0.0.1:{port}", timeout=2.0)
    started = time.monotonic()
    with pytest.raises(RemoteError):
        source.fetch()
    assert time.monotonic() - started < 6
