"""The vault_server fixture gives a working OpenBao: KV v2 write, read and versions."""

from __future__ import annotations

import uuid

import pytest

from tests.fixtures.servers import VaultServer

pytestmark = pytest.mark.vault


def test_kv2_write_creates_a_new_version(vault_server: VaultServer) -> None:
    kv = vault_server.client.secrets.kv.v2
    path = f"smoke/{uuid.uuid4().hex}"
    assert vault_server.client.is_authenticated()

    first = kv.create_or_update_secret(path=path, secret={"greeting": "hello"})
    second = kv.create_or_update_secret(path=path, secret={"greeting": "bye"})

    assert (first["data"]["version"], second["data"]["version"]) == (1, 2)
    latest = kv.read_secret_version(path=path, raise_on_deleted_version=True)
    assert latest["data"]["data"] == {"greeting": "bye"}
    old = kv.read_secret_version(path=path, version=1, raise_on_deleted_version=True)
    assert old["data"]["data"] == {"greeting": "hello"}
