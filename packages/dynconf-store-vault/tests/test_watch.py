"""The conditional watch: metadata version polled, data read only when it moved."""

from __future__ import annotations

import json
from typing import Any

import pytest
from vault_testlib import SpecFactory, Watcher

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import ABSENT, Fetched
from dynconf_store_vault import VAULT_STORE

pytestmark = pytest.mark.vault


def put(vault_server: Any, path: str, data: dict[str, Any]) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(path, secret=data)


def test_start_value_is_not_announced_and_a_change_is(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"v": 1})
    with Watcher(VAULT_STORE.build(spec_for(f"secret/{name}"))) as watch:
        assert watch.quiet(0.8)
        put(vault_server, name, {"v": 2})
        answer = watch.next()
        assert isinstance(answer, Fetched)
        assert json.loads(answer.text) == {"v": 2} and answer.revision == "2"
        assert watch.quiet(0.6)


def test_delete_delivers_absent_and_undelete_delivers_the_document(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"v": 1})
    kv = vault_server.client.secrets.kv.v2
    with Watcher(VAULT_STORE.build(spec_for(f"secret/{name}"))) as watch:
        watch.quiet(0.5)
        kv.delete_latest_version_of_secret(name)
        assert watch.next() is ABSENT
        kv.undelete_secret_versions(name, versions=[1])
        answer = watch.next()
        assert isinstance(answer, Fetched) and json.loads(answer.text) == {"v": 1}


def test_destroy_and_metadata_purge_deliver_absent(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"v": 1})
    kv = vault_server.client.secrets.kv.v2
    with Watcher(VAULT_STORE.build(spec_for(f"secret/{name}"))) as watch:
        watch.quiet(0.5)
        kv.destroy_secret_versions(name, versions=[1])
        assert watch.next() is ABSENT
        put(vault_server, name, {"v": 2})
        assert isinstance(watch.next(), Fetched)
        kv.delete_metadata_and_all_versions(name)
        assert watch.next() is ABSENT
        put(vault_server, name, {"v": 3})
        answer = watch.next()
        assert isinstance(answer, Fetched) and answer.revision == "1"


def test_a_secret_created_after_the_watch_started_is_delivered(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    with Watcher(VAULT_STORE.build(spec_for(f"secret/{name}"))) as watch:
        watch.quiet(0.5)
        put(vault_server, name, {"v": "new"})
        answer = watch.next()
        assert isinstance(answer, Fetched) and json.loads(answer.text) == {"v": "new"}


def test_watch_asks_only_the_metadata_while_nothing_moves(
    vault_server: Any, spec_for: SpecFactory, policy: Any, name: str
) -> None:
    # A token that may read the metadata but not the data: quiet ticks never touch the data.
    put(vault_server, name, {"v": 1})
    policy(f"meta-{name}", f'path "secret/metadata/{name}" {{ capabilities = ["read"] }}')
    token = vault_server.client.auth.token.create(policies=[f"meta-{name}"], ttl="1h")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", token=token["auth"]["client_token"]))
    with Watcher(source) as watch:
        assert watch.quiet(1.0)
        assert watch.error is None and not watch.ended.is_set()
        put(vault_server, name, {"v": 2})  # now the data must be read, and is refused
        assert watch.ended.wait(10)
        assert isinstance(watch.error, AuthError)


def test_watch_with_a_data_only_policy_reads_the_data_and_delivers_a_change(
    vault_server: Any, spec_for: SpecFactory, policy: Any, name: str, caplog: Any
) -> None:
    # Found by the e2e stores leg: the usual least-privilege policy grants read on the data
    # path alone; the metadata check was refused, the watch ended, the file stayed stale.
    put(vault_server, name, {"v": 1})
    policy(f"data-{name}", f'path "secret/data/{name}" {{ capabilities = ["read"] }}')
    token = vault_server.client.auth.token.create(policies=[f"data-{name}"], ttl="1h")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", token=token["auth"]["client_token"]))
    with Watcher(source) as watch:
        assert watch.quiet(0.8)
        put(vault_server, name, {"v": 2})
        answer = watch.next()
        assert isinstance(answer, Fetched)
        assert json.loads(answer.text) == {"v": 2} and answer.revision == "2"
        assert watch.quiet(0.6)
        assert watch.error is None
    assert [r for r in caplog.records if r.getMessage() == "vault_watch_reads_data"]


def test_watch_with_a_token_refused_everywhere_still_ends_with_the_refusal(
    vault_server: Any, spec_for: SpecFactory, policy: Any, name: str
) -> None:
    put(vault_server, name, {"v": 1})
    policy(f"none-{name}", f'path "secret/data/other-{name}" {{ capabilities = ["read"] }}')
    token = vault_server.client.auth.token.create(policies=[f"none-{name}"], ttl="1h")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", token=token["auth"]["client_token"]))
    with Watcher(source) as watch:
        assert watch.ended.wait(10)
        assert isinstance(watch.error, AuthError)


def test_stop_is_noticed_within_a_slice(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"v": 1})
    watch = Watcher(VAULT_STORE.build(spec_for(f"secret/{name}")), interval=30.0).__enter__()
    watch.quiet(0.5)
    assert watch.stop() < 0.6


def test_a_mount_without_versions_ends_the_watch(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    vault_server.client.sys.enable_secrets_engine("kv", path=name, options={"version": "1"})
    with Watcher(VAULT_STORE.build(spec_for(f"{name}/app"))) as watch:
        assert watch.ended.wait(10)
        assert isinstance(watch.error, RemoteError)
        assert "not a KV v2 mount" in str(watch.error)
