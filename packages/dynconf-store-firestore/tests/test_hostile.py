"""The Firestore client connects to the API itself, not through the environment's proxy.

gRPC reads ``grpc_proxy`` / ``https_proxy`` / ``http_proxy`` for every channel; a loopback
proxy stands in for them. gRPC follows no redirects, so there is no redirect case.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynconf.errors import RemoteError

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
