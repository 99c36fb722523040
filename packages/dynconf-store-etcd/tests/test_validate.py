"""etcd spec refusals: each names the fix; describe never carries a credential."""

from __future__ import annotations

import pytest

from dynconf.errors import BackendError
from dynconf.stores import StoreSpec, TlsSettings, is_async_source
from dynconf_store_etcd import ETCD_STORE

GOOD = "https://etcd.infra.svc:2379"


def refusals(**fields: object) -> list[str]:
    values: dict[str, object] = {"source": "etcd", "endpoint": GOOD, "key": "myapp/config.json"}
    values.update(fields)
    return ETCD_STORE.validate(StoreSpec.from_inputs(**values))  # type: ignore[arg-type]


def test_plain_key_over_https_is_accepted() -> None:
    assert refusals() == []


def test_username_with_password_and_client_certificate_together_are_accepted() -> None:
    tls = TlsSettings(ca_file="ca.crt", cert_file="c.crt", key_file="c.key")
    assert refusals(auth_username="myapp", password="pw", tls=tls) == []


@pytest.mark.parametrize(
    ("fields", "fix"),
    [
        ({"auth_username": "myapp"}, "needs a password"),
        ({"password": "pw"}, "--auth-username"),
        ({"token": "t"}, "takes no token"),
        ({"auth": "kubernetes"}, "takes no --auth"),
        ({"auth_role": "r"}, "--auth-role"),
        ({"key": "myapp/config"}, "extension naming its format"),
        ({"key": "a.json,b.json"}, "one key per source"),
        ({"key": ""}, "needs --key"),
        ({"endpoint": ""}, "needs --endpoint"),
        ({"endpoint": "etcd:2379"}, "http:// or https://"),
        ({"endpoint": "http://a:2379,http://b:2379"}, "several addresses"),
        ({"endpoint": "https://root:pw@etcd:2379"}, "carries credentials"),
        ({"endpoint": "http://etcd:2379", "tls": TlsSettings(ca_file="ca.crt")}, "use https://"),
        ({"tls": TlsSettings(cert_file="c.crt")}, "--tls-cert needs --tls-key"),
        ({"namespace": "ns"}, "vault's"),
    ],
)
def test_refusal_names_the_fix(fields: dict[str, object], fix: str) -> None:
    found = refusals(**fields)
    assert any(fix in line for line in found), found


def test_a_format_override_frees_the_key_extension() -> None:
    assert refusals(key="myapp/config", extra={"format": "yaml"}) == []


def test_describe_redacts_even_an_unparsable_endpoint() -> None:
    spec = StoreSpec(source="etcd", endpoint="https://root:s3cr3t@[bad:2379", key="k.json")
    assert "s3cr3t" not in ETCD_STORE.describe(spec)
    assert all("s3cr3t" not in line for line in ETCD_STORE.validate(spec))


def test_build_refuses_an_invalid_spec_without_io() -> None:
    with pytest.raises(BackendError, match="needs a password"):
        ETCD_STORE.build(StoreSpec(source="etcd", endpoint=GOOD, key="k.json",
                                   auth_username="u"))  # fmt: skip


def test_store_type_declares_push_and_blocking() -> None:
    assert ETCD_STORE.capability.value == "push"
    source = ETCD_STORE.build(StoreSpec(source="etcd", endpoint=GOOD, key="k.json"))
    assert is_async_source(source) is False  # a blocking client: the follower runs it in a thread
    source.close()
    assert ETCD_STORE.describe(StoreSpec(source="etcd", endpoint=GOOD, key="k.json")) == (
        f"etcd {GOOD} key k.json"
    )
