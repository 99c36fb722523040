"""``Vault(addr, path, ...)``: the typed constructor against a real OpenBao."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dynconf.config import DynamicConfig
from dynconf.errors import BackendError
from dynconf_store_vault import Vault

pytestmark = pytest.mark.vault


def put(vault_server: Any, path: str, data: dict[str, Any]) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(
        path, secret=data, mount_point="secret"
    )


def test_vault_constructor_loads_and_reloads_a_change(vault_server: Any) -> None:
    name = "c" + uuid.uuid4().hex[:10]
    put(vault_server, name, {"db": {"port": 1}})
    source = Vault(vault_server.addr, f"secret/{name}", token=vault_server.token)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 1
    put(vault_server, name, {"db": {"port": 2}})
    config.refresh_remote()
    assert config.reload()["port"] == 2
    source.close()


def test_vault_token_callable_is_asked_again_after_the_token_is_revoked(
    vault_server: Any,
) -> None:
    name = "c" + uuid.uuid4().hex[:10]
    put(vault_server, name, {"db": {"port": 1}})
    client = vault_server.client
    tokens = [client.auth.token.create(policies=["root"], ttl="1h")["auth"]["client_token"]]
    asked: list[int] = []

    def token() -> str:
        asked.append(1)
        return tokens[-1]

    source = Vault(vault_server.addr, f"secret/{name}", token=token)
    config = DynamicConfig(None, "db").remote(source)
    assert config.init()["port"] == 1
    first = len(asked)
    client.auth.token.revoke(tokens[-1])
    tokens.append(client.auth.token.create(policies=["root"], ttl="1h")["auth"]["client_token"])
    config.refresh_remote()
    assert config.reload()["port"] == 1
    assert len(asked) > first
    source.close()


def test_vault_approle_secret_id_callable_is_read_at_each_login(vault_server: Any) -> None:
    client = vault_server.client
    mount = "ar" + uuid.uuid4().hex[:8]
    client.sys.enable_auth_method("approle", path=mount)
    name = "c" + uuid.uuid4().hex[:10]
    put(vault_server, name, {"db": {"port": 7}})
    client.sys.create_or_update_policy(
        name=f"p-{name}", policy='path "secret/*" { capabilities = ["read"] }'
    )
    client.auth.approle.create_or_update_approle(
        "app", token_policies=[f"p-{name}"], token_ttl="1h", mount_point=mount
    )
    role_id = client.auth.approle.read_role_id("app", mount_point=mount)["data"]["role_id"]
    secret_id = client.auth.approle.generate_secret_id("app", mount_point=mount)["data"]
    reads: list[int] = []

    def secret() -> str:
        reads.append(1)
        return str(secret_id["secret_id"])

    source = Vault(
        vault_server.addr,
        f"secret/{name}",
        auth="approle",
        auth_mount=mount,
        auth_role=role_id,
        password=secret,
    )
    assert DynamicConfig(None, "db").remote(source).init()["port"] == 7
    assert reads == [1]
    source.source.keeper.invalidate()  # type: ignore[attr-defined]
    source.fetch()
    assert reads == [1, 1]
    source.close()


def test_vault_constructor_refuses_with_the_python_keyword(vault_server: Any) -> None:
    with pytest.raises(BackendError, match="needs auth_username=") as caught:
        Vault(vault_server.addr, "secret/x", auth="userpass", password="p")
    assert "--" not in str(caught.value)
