"""The Firestore client connects to the API itself, not through the environment's proxy.

gRPC reads ``grpc_proxy`` / ``https_proxy`` / ``http_proxy`` for every channel; a loopback
proxy stands in for them. gRPC follows no redirects, so there is no redirect case.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dynconf.errors import RemoteError
from tests.fixtures.hostile import Listener, request_path

pytestmark = pytest.mark.firestore


def test_environment_proxy_is_not_used(firestore_server: Any, make_source: Any,
                                       doc_path: str, env_proxy: Any) -> None:  # fmt: skip
    firestore_server.client.document(doc_path).set({"v": 1})
    env_proxy.engage()
    assert make_source(doc_path).fetch().text == '{"v": 1}'
    assert env_proxy.seen == []


def test_environment_proxy_is_used_when_opted_in(firestore_server: Any, make_source: Any,
                                                 doc_path: str, env_proxy: Any) -> None:  # fmt: skip
    env_proxy.engage()
    source = make_source(doc_path, extra={"use_proxy": "true"}, timeout=3.0)
    with pytest.raises(RemoteError):
        source.fetch()  # the recording proxy refuses the tunnel
    assert env_proxy.seen and env_proxy.seen[0].startswith(b"CONNECT ")


ACCESS_TOKEN = "planted-metadata-access-token-6d0f2a"


def _metadata_answer(request: bytes) -> bytes:
    path = request_path(request)
    if "/token" in path:
        body = json.dumps(
            {"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}
        )
    else:
        body = json.dumps({"email": "app@project.iam.gserviceaccount.com", "scopes": ["x"]})
    return (
        "HTTP/1.1 200 OK\r\nMetadata-Flavor: Google\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()


def test_metadata_token_is_not_fetched_through_the_environment_proxy(
    monkeypatch: pytest.MonkeyPatch, env_proxy: Any
) -> None:
    from google.auth.compute_engine import _metadata
    from google.auth.transport.requests import Request

    from dynconf.stores import StoreSpec
    from dynconf_store_firestore import FIRESTORE_STORE

    server = Listener("127.0.0.1", _metadata_answer)
    monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", f"127.0.0.1:{server.port}")
    env_proxy.engage()
    source = FIRESTORE_STORE.build(
        StoreSpec(source="firestore", endpoint="demo-project", key="config/app")
    )
    try:
        credentials = source._build_client()._credentials
        credentials.refresh(Request())  # the library's own request, which reads the proxy
    finally:
        server.close()
    assert credentials.token == ACCESS_TOKEN
    assert server.seen
    assert env_proxy.seen == []
