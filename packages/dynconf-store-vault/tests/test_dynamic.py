"""Dynamic secrets: the database engine on PostgreSQL and the pki engine, with leases."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from vault_testlib import SpecFactory, Watcher

from dynconf.errors import RemoteError
from dynconf.stores import Fetched, Lease, WatchCapability
from dynconf_store_vault import VAULT_STORE, LeaseAction

pytestmark = pytest.mark.vault

Database = Callable[..., str]


@pytest.fixture
def database(vault_server: Any, postgres_server: Any) -> Database:
    """``database(default_ttl, max_ttl)`` mounts a database engine on PostgreSQL; returns the
    key of its ``app`` role's credentials."""

    def make(default_ttl: str = "1h", max_ttl: str = "2h") -> str:
        mount = f"db-{uuid.uuid4().hex[:8]}"
        client = vault_server.client
        client.sys.enable_secrets_engine("database", path=mount)
        client.write(
            f"{mount}/config/pg",
            plugin_name="postgresql-database-plugin",
            connection_url=(
                f"postgresql://{{{{username}}}}:{{{{password}}}}@"
                f"{postgres_server.host}:{postgres_server.port}/"
                f"{postgres_server.dbname}?sslmode=disable"
            ),
            username=postgres_server.user,
            password=postgres_server.password,
            allowed_roles=["app"],
            verify_connection=True,
        )
        client.write(
            f"{mount}/roles/app",
            db_name="pg",
            default_ttl=default_ttl,
            max_ttl=max_ttl,
            creation_statements=[
                "CREATE ROLE \"{{name}}\" WITH LOGIN PASSWORD '{{password}}' "
                "VALID UNTIL '{{expiration}}';"
            ],
        )
        return f"{mount}/creds/app"

    return make


def can_log_in(postgres_server: Any, document: dict[str, Any]) -> bool:
    import psycopg

    try:
        with psycopg.connect(
            host=postgres_server.host,
            port=postgres_server.port,
            user=document["username"],
            password=document["password"],
            dbname=postgres_server.dbname,
            connect_timeout=5,
        ):
            return True
    except psycopg.OperationalError:
        return False


@pytest.mark.postgres
def test_database_credentials_come_with_a_renewable_lease(
    spec_for: SpecFactory, database: Database, postgres_server: Any
) -> None:
    source = VAULT_STORE.build(spec_for(database(), dynamic=True))
    assert source.capability is WatchCapability.INTERVAL
    answer = source.fetch()
    assert isinstance(answer, Fetched) and answer.lease is not None
    document = json.loads(answer.text)
    assert can_log_in(postgres_server, document)
    assert answer.lease.renewable and answer.lease.lease_id.startswith(source.describe().split()[2])
    assert answer.lease.ttl_seconds == 3600
    assert answer.revision is None
    assert source.lease_schedule is not None
    assert source.lease_schedule.action is LeaseAction.RENEW


@pytest.mark.postgres
def test_renewal_believes_the_granted_ttl_not_the_asked_one(
    spec_for: SpecFactory, database: Database
) -> None:
    source = VAULT_STORE.build(spec_for(database(default_ttl="10s", max_ttl="12s"), dynamic=True))
    answer = source.fetch()
    assert isinstance(answer, Fetched) and answer.lease is not None
    time.sleep(4)
    renewed = source.renew(answer.lease)
    # the role's max_ttl cuts the renewal short: ~8 s left, not the role's 10 s default
    assert renewed.lease_id == answer.lease.lease_id
    assert 5 <= renewed.ttl_seconds <= 9
    assert source.lease_schedule is not None and source.lease_schedule.lease == renewed


@pytest.mark.postgres
def test_revoke_ends_the_credential(
    spec_for: SpecFactory, database: Database, postgres_server: Any, vault_server: Any
) -> None:
    source = VAULT_STORE.build(spec_for(database(), dynamic=True))
    answer = source.fetch()
    assert isinstance(answer, Fetched) and answer.lease is not None
    source.revoke(answer.lease, deadline=2.0)
    assert not can_log_in(postgres_server, json.loads(answer.text))
    with pytest.raises(RemoteError):
        source.renew(answer.lease)


@pytest.mark.postgres
def test_renewable_lease_is_renewed_then_reissued_when_renewal_stops_working(
    spec_for: SpecFactory, database: Database
) -> None:
    source = VAULT_STORE.build(spec_for(database(default_ttl="2s", max_ttl="4s"), dynamic=True))
    first = source.fetch()
    assert isinstance(first, Fetched)
    with Watcher(source, interval=0.2) as watch:
        fresh = watch.next(timeout=15)
    assert isinstance(fresh, Fetched)
    assert json.loads(fresh.text)["username"] != json.loads(first.text)["username"]
    assert source.lease_renewals >= 1  # renewed first (delivering nothing), re-issued after


def test_non_renewable_lease_is_refused_renewal_without_a_request(spec_for: SpecFactory) -> None:
    source = VAULT_STORE.build(spec_for("database/creds/none", dynamic=True))
    with pytest.raises(RemoteError, match="not renewable"):
        source.renew(Lease("pki/issue/web/x", 60.0, renewable=False))


@pytest.fixture
def pki(vault_server: Any) -> Callable[..., str]:
    """``pki(generate_lease)`` mounts a pki engine with a root and a ``web`` role."""

    def make(generate_lease: bool = True) -> str:
        mount = f"pki-{uuid.uuid4().hex[:8]}"
        client = vault_server.client
        client.sys.enable_secrets_engine("pki", path=mount, config={"max_lease_ttl": "24h"})
        client.write(f"{mount}/root/generate/internal", common_name="dynconf test root", ttl="24h")
        client.write(
            f"{mount}/roles/web",
            allowed_domains=["example.test"],
            allow_subdomains=True,
            max_ttl="1h",
            generate_lease=generate_lease,
        )
        return mount

    return make


def test_pki_certificate_lease_is_not_renewable_and_ends_by_not_after(
    spec_for: SpecFactory, pki: Callable[..., str]
) -> None:
    mount = pki()
    source = VAULT_STORE.build(
        spec_for(f"{mount}/issue/web?common_name=app.example.test&ttl=60s", dynamic=True)
    )
    answer = source.fetch()
    assert isinstance(answer, Fetched) and answer.lease is not None
    document = json.loads(answer.text)
    assert document["certificate"].startswith("-----BEGIN CERTIFICATE-----")
    assert answer.lease.lease_id and not answer.lease.renewable
    assert 50 <= answer.lease.ttl_seconds <= 60
    assert answer.lease.ttl_seconds <= document["expiration"] - time.time() + 1
    assert source.lease_schedule is not None
    assert source.lease_schedule.action is LeaseAction.REISSUE


def test_pki_certificate_without_a_lease_lives_until_its_expiration(
    spec_for: SpecFactory, pki: Callable[..., str]
) -> None:
    mount = pki(generate_lease=False)
    source = VAULT_STORE.build(
        spec_for(f"{mount}/issue/web?common_name=app.example.test&ttl=120s", dynamic=True)
    )
    answer = source.fetch()
    assert isinstance(answer, Fetched) and answer.lease is not None
    assert answer.lease.lease_id == ""
    assert 110 <= answer.lease.ttl_seconds <= 120


def test_pki_certificate_is_reissued_at_90_percent_and_never_renewed(
    spec_for: SpecFactory, pki: Callable[..., str]
) -> None:
    mount = pki()
    source = VAULT_STORE.build(
        spec_for(f"{mount}/issue/web?common_name=app.example.test&ttl=3s", dynamic=True)
    )
    first = source.fetch()
    assert isinstance(first, Fetched)
    started = time.monotonic()
    with Watcher(source, interval=0.2) as watch:
        fresh = watch.next(timeout=10)
    assert isinstance(fresh, Fetched)
    assert json.loads(fresh.text)["serial_number"] != json.loads(first.text)["serial_number"]
    assert 1.5 <= time.monotonic() - started <= 4.0
    assert source.lease_renewals == 0 and source.lease_renewal_failures == 0
