"""KV v2 against a real OpenBao: fetch, section, absent states, namespace, errors."""

from __future__ import annotations

import json
import time
from typing import Any

import hvac.exceptions
import pytest
from vault_testlib import SpecFactory

from dynconf.errors import RemoteError
from dynconf.stores import ABSENT, Fetched, WatchCapability
from dynconf_store_vault import VAULT_STORE

pytestmark = pytest.mark.vault


def put(vault_server: Any, path: str, data: dict[str, Any], mount: str = "secret") -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(path, secret=data, mount_point=mount)


def test_fetch_returns_the_secret_fields_as_json_with_the_version(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"db": {"host": "db.internal", "port": 5432}, "debug": True})
    put(vault_server, name, {"db": {"host": "db2.internal", "port": 5432}, "debug": False})
    source = VAULT_STORE.build(spec_for(f"secret/{name}"))
    answer = source.fetch()
    assert isinstance(answer, Fetched)
    assert answer.format == "json"
    assert json.loads(answer.text) == {"db": {"host": "db2.internal", "port": 5432}, "debug": False}
    assert answer.revision == "2" and answer.numeric_revision == 2
    assert source.capability is WatchCapability.CONDITIONAL


def test_section_wraps_the_fields_under_its_name(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"user": "app"})
    answer = VAULT_STORE.build(spec_for(f"/secret/{name}", section="db")).fetch()
    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == {"db": {"user": "app"}}


def test_nested_path_under_the_mount(vault_server: Any, spec_for: SpecFactory, name: str) -> None:
    put(vault_server, f"team/{name}/config", {"a": "1"})
    answer = VAULT_STORE.build(spec_for(f"secret/team/{name}/config")).fetch()
    assert isinstance(answer, Fetched) and json.loads(answer.text) == {"a": "1"}


def test_missing_secret_is_absent(spec_for: SpecFactory, name: str) -> None:
    assert VAULT_STORE.build(spec_for(f"secret/{name}")).fetch() is ABSENT


def test_deleted_latest_version_is_absent(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"a": "1"})
    vault_server.client.secrets.kv.v2.delete_latest_version_of_secret(name)
    source = VAULT_STORE.build(spec_for(f"secret/{name}"))
    assert source.fetch() is ABSENT
    assert source.check() is ABSENT


def test_destroyed_latest_version_is_absent(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    put(vault_server, name, {"a": "1"})
    vault_server.client.secrets.kv.v2.destroy_secret_versions(name, versions=[1])
    source = VAULT_STORE.build(spec_for(f"secret/{name}"))
    assert source.fetch() is ABSENT
    assert source.check() is ABSENT


def test_enterprise_namespace_header_reaches_the_namespace(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    # OpenBao implements namespaces; the same path outside the namespace does not exist.
    vault_server.client.adapter.post(f"/v1/sys/namespaces/{name}")
    vault_server.client.adapter.post(
        "/v1/sys/mounts/kv",
        json={"type": "kv", "options": {"version": "2"}},
        headers={"X-Vault-Namespace": name},
    )
    # a new KV v2 mount upgrades itself in the background and refuses writes until done
    deadline = time.monotonic() + 30
    while True:
        try:
            vault_server.client.adapter.post(
                "/v1/kv/data/app",
                json={"data": {"team": name}},
                headers={"X-Vault-Namespace": name},
            )
            break
        except hvac.exceptions.InvalidRequest as error:
            if "Upgrading" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    inside = VAULT_STORE.build(spec_for("kv/app", namespace=name)).fetch()
    assert isinstance(inside, Fetched) and json.loads(inside.text) == {"team": name}
    assert VAULT_STORE.build(spec_for("kv/app")).fetch() is ABSENT  # no such path at the root


def test_kv_v1_mount_is_a_remote_error_naming_kv_v2(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    vault_server.client.sys.enable_secrets_engine("kv", path=name, options={"version": "1"})
    vault_server.client.secrets.kv.v1.create_or_update_secret("app", {"a": "1"}, mount_point=name)
    with pytest.raises(RemoteError, match="KV v2"):
        VAULT_STORE.build(spec_for(f"{name}/app")).fetch()


def test_unreachable_server_is_a_prompt_remote_error(name: str) -> None:
    import time

    from dynconf.stores import StoreSpec

    spec = StoreSpec(
        source="vault", endpoint="http://127.0.0.1:9", key=f"secret/{name}", token="t", timeout=2.0
    )
    started = time.monotonic()
    with pytest.raises(RemoteError, match="could not be reached"):
        VAULT_STORE.build(spec).fetch()
    assert time.monotonic() - started < 3.0
