"""Faults: the server restarted mid-watch, credentials revoked mid-run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_auth import approle
from vault_testlib import SpecFactory, TlsBao, Watcher

from dynconf.errors import AuthError, DynconfError, RemoteError
from dynconf.stores import Fetched, StoreSpec, TlsSettings
from dynconf_store_vault import VAULT_STORE

pytestmark = pytest.mark.vault


def test_server_restart_mid_watch_is_reported_and_the_next_change_delivered(
    tls_bao: TlsBao,
) -> None:
    tls_bao.call("POST", "secret/data/restart", {"data": {"v": 1}})
    source = VAULT_STORE.build(StoreSpec(
        source="vault", endpoint=tls_bao.address, key="secret/restart",
        token=tls_bao.root_token, tls=TlsSettings(ca_file=str(tls_bao.pki.ca)), timeout=2.0,
    ))  # fmt: skip
    reported: list[DynconfError] = []
    source.on_failure = reported.append
    with Watcher(source, interval=0.2) as watch:
        assert watch.quiet(0.6)
        tls_bao.stop()
        assert watch.quiet(1.5)
        assert reported and all(isinstance(e, RemoteError) for e in reported)
        tls_bao.start()  # comes back sealed, is unsealed, keeps its data
        tls_bao.call("POST", "secret/data/restart", {"data": {"v": 2}})
        answer = watch.next(timeout=30)
        assert watch.error is None
    assert isinstance(answer, Fetched) and json.loads(answer.text) == {"v": 2}
    assert answer.revision == "2"


def test_credentials_revoked_mid_run_end_the_watch_after_exactly_one_relogin(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(name, secret={"v": 1})
    mount = enabled_auth("approle")
    role_id, secret_id = approle(vault_server, mount, [read_policy])
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=secret_id,
        )
    )
    with Watcher(source, interval=0.2) as watch:
        assert watch.quiet(0.6)
        # the operator revokes the secret id and every token it produced
        client = vault_server.client
        client.auth.approle.destroy_secret_id("app", secret_id, mount_point=mount)
        client.sys.revoke_prefix(f"auth/{mount}/login")
        assert watch.ended.wait(10)
    assert isinstance(watch.error, AuthError)
    assert "refused the approle login" in str(watch.error)
    assert source.keeper.login_attempts == 2
