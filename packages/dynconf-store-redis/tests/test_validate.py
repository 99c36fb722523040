"""redis spec refusals name the fix; describe and refusals never carry the password."""

from __future__ import annotations

import pytest

from dynconf.errors import BackendError
from dynconf.stores import StoreSpec, TlsSettings, is_async_source
from dynconf_store_redis import REDIS_STORE
from dynconf_store_redis.address import parse_url

CA = TlsSettings(ca_file="ca.crt")


def refusals(endpoint: str = "redis://redis.infra.svc:6379/0", **fields: object) -> list[str]:
    values: dict[str, object] = {"source": "redis", "endpoint": endpoint, "key": "myapp/c.json"}
    values.update(fields)
    return REDIS_STORE.validate(StoreSpec.from_inputs(**values))  # type: ignore[arg-type]


def test_open_redis_url_is_accepted() -> None:
    assert refusals() == []


def test_rediss_with_ca_and_client_certificate_is_accepted() -> None:
    tls = TlsSettings(ca_file="ca.crt", cert_file="c.crt", key_file="c.key")
    assert refusals("rediss://u:p@redis:6380/2", tls=tls) == []


@pytest.mark.parametrize(
    ("endpoint", "fields", "fix"),
    [
        ("redis://redis:6379/0", {"tls": CA}, "use rediss://"),
        ("redis://redis:6379/0", {"tls": TlsSettings(cert_file="c", key_file="k")}, "rediss://"),
        ("rediss://redis:6380/0", {"tls": TlsSettings(server_name="x")}, "--tls-server-name"),
        ("rediss://redis:6380/0", {"tls": TlsSettings(skip_verify=True)}, "cannot be turned off"),
        ("redis://redis:6379/0", {"password": "pw"}, "redis takes no password slot;"),
        ("redis://redis:6379/0", {"token": "t"}, "redis takes no token;"),
        ("redis://redis:6379/0", {"auth_username": "u"}, "ride in the URL"),
        ("redis://redis:6379/0", {"auth": "token"}, "takes no --auth"),
        ("redis://redis:6379/x", {}, "must be a number"),
        ("redis://redis:6379/0?timeout=3", {}, "only db="),
        ("http://redis:6379/0", {}, "redis:// (plain) or rediss://"),
        ("", {}, "needs --endpoint"),
        ("redis://redis:6379/0", {"key": "myapp/config"}, "extension naming its format"),
        ("redis://redis:6379/0", {"key": "a.json,b.json"}, "one key per source"),
    ],
)
def test_refusal_names_the_fix(endpoint: str, fields: dict[str, object], fix: str) -> None:
    found = refusals(endpoint, **fields)
    assert any(fix in line for line in found), found


@pytest.mark.parametrize(
    ("endpoint", "shown"),
    [
        ("redis://config-reader:s3cr3t@redis:6379/0", "redis://config-reader:…@redis:6379/0"),
        ("redis://:s3cr3t@redis:6379/0", "redis://:…@redis:6379/0"),
        ("redis://config-reader@redis:6379/0", "redis://config-reader:…@redis:6379/0"),
        ("rediss://u:p@ss:w0rd@redis:6380/1", "rediss://u:…@redis:6380/1"),
    ],
)
def test_describe_redacts_the_password_and_keeps_the_user(endpoint: str, shown: str) -> None:
    spec = StoreSpec(source="redis", endpoint=endpoint, key="k.json")
    assert REDIS_STORE.describe(spec) == f"redis {shown} key k.json"


def test_unparsable_url_is_refused_without_its_password() -> None:
    found = refusals("redis://user:s3cr3t@[redis:6379/0")
    assert found and all("s3cr3t" not in line for line in found)
    spec = StoreSpec(source="redis", endpoint="redis://user:s3cr3t@[redis:6379/0", key="k.json")
    assert "s3cr3t" not in REDIS_STORE.describe(spec)
    with pytest.raises(BackendError) as caught:
        REDIS_STORE.build(spec)
    assert "s3cr3t" not in str(caught.value)


def test_url_parts_database_user_and_percent_encoded_password() -> None:
    address, problems = parse_url("rediss://reader:p%40ss%23@redis:6380/3")
    assert problems == [] and address is not None
    assert (address.tls, address.host, address.port, address.db) == (True, "redis", 6380, 3)
    assert (address.username, address.password) == ("reader", "p@ss#")
    assert "p@ss#" not in repr(address)
    lone, _ = parse_url("redis://reader@redis")
    assert lone is not None and (lone.username, lone.password, lone.port, lone.db) == (
        "reader",
        None,
        6379,
        0,
    )


def test_store_type_declares_push_and_blocking() -> None:
    assert REDIS_STORE.capability.value == "push"
    source = REDIS_STORE.build(
        StoreSpec(source="redis", endpoint="redis://127.0.0.1:1", key="k.json")
    )
    assert is_async_source(source) is False  # a blocking client: the follower runs it in a thread
    source.close()
