"""The operator reads a Render's document once, through ``dynconf.follow.fetch_once``.

A blocking store (the file store, consul's kind) and an async one (NATS) are each built,
read and closed by the same call; an absent document is one refusal naming the Render's key.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from dynconf.errors import MissingError
from dynconf.stores import StoreSpec
from dynconf_k8s.operator.targets import fetch_document


def test_a_blocking_store_is_read_once(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"port": 9000}', encoding="utf-8")
    fetched = fetch_document(StoreSpec(source="file", endpoint="", key=str(path)))
    assert fetched.text == '{"port": 9000}' and fetched.format == "json"


def test_an_absent_document_in_a_blocking_store_names_the_renders_key(tmp_path: Path) -> None:
    spec = StoreSpec(source="file", endpoint="", key=str(tmp_path / "gone.json"))
    with pytest.raises(MissingError, match="fix the Render's key"):
        fetch_document(spec)


async def _put(url: str, bucket: str, key: str, value: bytes) -> None:
    import nats
    from nats.js.api import KeyValueConfig

    client = await nats.connect(url, connect_timeout=5)
    try:
        kv = await client.jetstream().create_key_value(KeyValueConfig(bucket=bucket))
        await kv.put(key, value)
    finally:
        await client.close()


@pytest.mark.nats
def test_an_async_store_is_read_once_on_a_loop_of_its_own(nats_server: Any) -> None:
    bucket = f"op{uuid.uuid4().hex[:8]}"
    asyncio.run(_put(nats_server.url, bucket, "config.json", b'{"port": 9100}'))
    spec = StoreSpec(source="nats", endpoint=nats_server.url, key=f"{bucket}/config.json")
    fetched = fetch_document(spec)
    assert fetched.text == '{"port": 9100}'


@pytest.mark.nats
def test_an_absent_document_in_an_async_store_names_the_renders_key(nats_server: Any) -> None:
    bucket = f"op{uuid.uuid4().hex[:8]}"
    asyncio.run(_put(nats_server.url, bucket, "other.json", b"{}"))
    spec = StoreSpec(source="nats", endpoint=nats_server.url, key=f"{bucket}/config.json")
    with pytest.raises(MissingError, match="fix the Render's key"):
        fetch_document(spec)


def test_a_store_refusal_names_the_render_and_class_fields_not_agent_flags() -> None:
    """The operator speaks its CRDs' words: ``spec.key``, ``spec.endpoint``, ``spec.tokenSecret``."""
    from dynconf.errors import Refusal
    from dynconf_k8s.operator.targets import spec_spelling

    assert [spec_spelling(f) for f in ("key", "endpoint", "token", "extra.format")] == [
        "spec.key",
        "spec.endpoint",
        "spec.tokenSecret",
        "format",
    ]
    refusal = Refusal("token", "vault auth token needs {field}")
    assert refusal.render(spec_spelling) == "vault auth token needs spec.tokenSecret"
