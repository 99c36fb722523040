"""A Vault answer or a pod's environment must not send the token or a password elsewhere.

A loopback fake answers 307 to another loopback host (what a misconfigured standby or a
hostile server does); a loopback env_proxy stands in for ``HTTP_PROXY`` and its siblings.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynconf.errors import DynconfError, RemoteError
from dynconf.stores import StoreSpec
from dynconf_store_vault import VAULT_STORE
from tests.fixtures.hostile import redirecting

pytestmark = pytest.mark.vault

TOKEN = "planted-vault-token-8d2a71"
PASSWORD = "planted-vault-password-5e0b3c"


def test_token_is_not_sent_to_a_redirect_target() -> None:
    with redirecting() as (vault, elsewhere):
        source = VAULT_STORE.build(
            StoreSpec(source="vault", endpoint=vault.url, key="secret/app", token=TOKEN)
        )
        with pytest.raises(RemoteError) as refused:
            source.fetch()
    assert vault.saw(TOKEN)
    assert elsewhere.seen == []
    assert "307 redirecting to http://127.0.0.2:" in refused.value.message
    assert "follow_redirects" in refused.value.message


def test_login_password_is_not_posted_to_a_redirect_target() -> None:
    with redirecting() as (vault, elsewhere):
        source = VAULT_STORE.build(
            StoreSpec(
                source="vault", endpoint=vault.url, key="secret/app", auth="userpass",
                auth_username="app", password=PASSWORD,
            )
        )  # fmt: skip
        with pytest.raises(DynconfError, match="redirecting"):
            source.fetch()
    assert vault.saw(PASSWORD)
    assert elsewhere.seen == []


def test_environment_proxy_is_not_used(vault_server: Any, env_proxy: Any, name: str) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(path=name, secret={"v": 1})
    env_proxy.engage()
    source = VAULT_STORE.build(
        StoreSpec(
            source="vault", endpoint=vault_server.addr, key=f"secret/{name}",
            token=vault_server.token,
        )
    )  # fmt: skip
    assert '"v": 1' in source.fetch().text
    assert env_proxy.seen == []
