"""The client against a config server written in another language: the document as the body.

The server here is the standard library's ``http.server`` on loopback, standing where a Go
or Java config server would: it answers ``GET /<application>/<profile>`` with the resolved
document itself (no envelope), optionally an ``ETag``, and has no ``/stream``.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import ABSENT, Fetched

from .conftest import client_source

pytestmark = pytest.mark.configserver


@dataclass
class Served:
    """What the loopback server answers for ``/billing/prod``; changed by the test."""

    body: bytes | None = b'{"db": {"host": "db.internal", "port": 5432}}'
    etag: str | None = None
    content_type: str = "application/json"
    paths: list[str] = field(default_factory=list)
    requests: queue.Queue[str] = field(default_factory=queue.Queue)
    """Each path once answered, in order (what a test awaits instead of sleeping)."""
    authorizations: list[str | None] = field(default_factory=list)


@pytest.fixture
def other_language() -> Iterator[tuple[str, Served]]:
    served = Served()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.paths.append(self.path)
            served.authorizations.append(self.headers.get("Authorization"))
            body = served.body
            if self.path != "/billing/prod" or body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.send_response(200)
                self.send_header("Content-Type", served.content_type)
                if served.etag:
                    self.send_header("ETag", served.etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            served.requests.put(self.path)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", served
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_a_bare_json_document_is_the_document_with_its_etag(other_language):
    url, served = other_language
    served.etag = '"v7"'
    source = client_source(url)

    answer = source.fetch()

    assert isinstance(answer, Fetched)
    assert answer.format == "json"
    assert answer.text == served.body.decode()  # type: ignore[union-attr]
    assert answer.revision == "v7"
    assert served.authorizations[-1] is not None  # the token slot still goes as bearer


def test_an_object_with_a_config_key_and_others_is_a_document_not_an_envelope(other_language):
    url, served = other_language
    served.body = json.dumps({"application": "billing", "config": {"a": 1}, "x": 2}).encode()

    answer = client_source(url).fetch()

    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == {"application": "billing", "config": {"a": 1}, "x": 2}
    assert answer.revision is None


def test_exactly_the_four_envelope_keys_are_read_as_the_envelope(other_language):
    url, served = other_language
    envelope = {"application": "billing", "profile": "prod", "generation": 3,
                "config": {"db": {"port": 1}}}  # fmt: skip
    served.body = json.dumps(envelope).encode()

    answer = client_source(url).fetch()

    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == {"db": {"port": 1}}
    assert answer.revision == "3"


def test_json_that_is_not_an_object_is_refused_as_remote(other_language):
    url, served = other_language
    served.body = b'["not", "a", "document"]'

    with pytest.raises(RemoteError) as caught:
        client_source(url).fetch()

    assert "a document is an object" in str(caught.value)


def test_a_server_without_a_stream_is_polled_and_changes_are_delivered(other_language):
    url, served = other_language
    source = client_source(url)
    delivered: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    def watch() -> None:
        for answer in source.changes(0.5, stop.is_set):
            delivered.put(answer)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        assert served.requests.get(timeout=10) == "/billing/prod/stream"
        assert served.requests.get(timeout=10) == "/billing/prod"  # 200: no stream, so poll
        assert served.requests.get(timeout=10) == "/billing/prod"  # the first poll
        assert delivered.empty(), "the first answer primes, as the stream's opening event does"

        served.body = b'{"db": {"host": "db.internal", "port": 6432}}'
        changed = delivered.get(timeout=10)
        assert isinstance(changed, Fetched)
        assert json.loads(changed.text)["db"]["port"] == 6432

        served.body = None
        assert delivered.get(timeout=10) is ABSENT
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_a_server_answering_404_for_document_and_stream_is_absent_not_polled(other_language):
    url, served = other_language
    served.body = None

    assert client_source(url).fetch() is ABSENT
