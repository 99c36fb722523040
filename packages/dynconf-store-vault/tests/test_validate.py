"""validate(): every refusal names the fix; describe() never carries a credential."""

from __future__ import annotations

from typing import Any

import pytest

from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_vault import VAULT_STORE

pytestmark = pytest.mark.vault

ADDR = "https://vault.vault.svc:8200"


def spec(**fields: Any) -> StoreSpec:
    fields.setdefault("endpoint", ADDR)
    fields.setdefault("key", "secret/myapp")
    return StoreSpec.from_inputs(source="vault", **fields)


def refusals(**fields: Any) -> list[str]:
    return VAULT_STORE.validate(spec(**fields))


@pytest.mark.parametrize(
    "fields",
    [
        {"token": "t"},
        {"auth": "kubernetes", "auth_role": "myapp"},
        {
            "auth": "kubernetes",
            "auth_role": "myapp",
            "auth_mount": "k8s-eu",
            "auth_token_path": "/var/run/secrets/tokens/vault",
        },
        {"auth": "approle", "auth_role": "rid", "password": "sid"},
        {"auth": "jwt", "token": "a.b.c"},
        {"auth": "jwt", "auth_token_path": "/jwt", "auth_role": "r", "auth_mount": "jwt-ci"},
        {"auth": "userpass", "auth_username": "u", "password": "p"},
        {"auth": "ldap", "auth_username": "u", "password": "p"},
        {"auth": "cert", "tls": TlsSettings(ca_file="/ca", cert_file="/c", key_file="/k")},
        {"token": "t", "namespace": "team-payments"},
        {"token": "t", "dynamic": True, "key": "database/creds/app"},
        {"token": "t", "dynamic": True, "key": "pki/issue/web?common_name=a.example.test"},
    ],
)
def test_valid_combinations_are_accepted(fields: dict[str, Any]) -> None:
    assert refusals(**fields) == []


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({}, "needs a token"),
        ({"auth": "kubernetes"}, "needs --auth-role"),
        ({"auth": "approle", "auth_role": "rid"}, "needs a password"),
        ({"auth": "approle", "password": "sid"}, "needs --auth-role"),
        ({"auth": "jwt"}, "--auth-token-path naming the file"),
        ({"auth": "userpass", "password": "p"}, "needs --auth-username"),
        ({"auth": "ldap", "auth_username": "u"}, "needs a password"),
        ({"auth": "cert"}, "needs --tls-cert and --tls-key"),
        ({"auth": "github", "token": "t"}, "use one of"),
        ({"token": "t", "auth_mount": "x"}, "--auth-mount means nothing to vault auth token"),
        (
            {"auth": "kubernetes", "auth_role": "r", "auth_username": "u"},
            "--auth-username means nothing to vault auth kubernetes",
        ),
        (
            {"auth": "userpass", "auth_username": "u", "password": "p", "auth_token_path": "/t"},
            "--auth-token-path means nothing",
        ),
        ({"token": "t", "key": "myapp"}, "must be <mount>/<path>"),
        ({"token": "t", "key": "secret/"}, "must be <mount>/<path>"),
        ({"token": "t", "key": "secret/a,secret/b"}, "one path per source"),
        ({"token": "t", "key": "secret/a?x=1"}, "only for dynamic engines"),
        ({"token": "t", "dynamic": True, "key": "database"}, "engine path"),
        ({"token": "t", "endpoint": ""}, "needs --endpoint"),
        ({"token": "t", "endpoint": "vault:8200"}, "http:// or https://"),
        ({"token": "t", "endpoint": "https://user:pw@vault:8200"}, "carries credentials"),
        ({"token": "t", "endpoint": "https://vault:port"}, "port is not a number"),
        (
            {"token": "t", "endpoint": "http://vault:8200", "tls": TlsSettings(ca_file="/ca")},
            "--ca cannot apply to a plain http://",
        ),
        (
            {
                "auth": "cert",
                "endpoint": "http://vault:8200",
                "tls": TlsSettings(cert_file="/c", key_file="/k"),
            },
            "needs an https:// endpoint",
        ),
        ({"token": "t", "tls": TlsSettings(cert_file="/c")}, "--tls-cert needs --tls-key"),
        ({"token": "t", "tls": TlsSettings(key_file="/k")}, "--tls-key needs --tls-cert"),
        ({"token": "t", "ref": "main"}, "--ref is git's"),
        ({"token": "t", "timeout": 0.0}, "--timeout must be a positive"),
    ],
)
def test_each_wrong_combination_is_refused_with_its_fix(
    fields: dict[str, Any], fragment: str
) -> None:
    found = refusals(**fields)
    assert any(fragment in r for r in found), found


def test_every_refusal_is_returned_at_once() -> None:
    found = refusals(
        auth="approle", key="nomount", endpoint="http://v:1", tls=TlsSettings(cert_file="/c")
    )
    assert len(found) >= 4


def test_build_refuses_what_validate_refuses() -> None:
    from dynconf.errors import BackendError

    with pytest.raises(BackendError, match="needs --auth-role"):
        VAULT_STORE.build(spec(auth="kubernetes"))


def test_describe_names_store_address_and_key_but_no_credential() -> None:
    text = VAULT_STORE.describe(
        spec(
            auth="approle",
            auth_role="rid",
            password="hunter2-secret-id",
            token="s.tokenvalue",
            namespace="team",
        )
    )
    assert text == f"vault {ADDR} secret/myapp namespace team"
    assert "hunter2" not in text and "tokenvalue" not in text


def test_describe_redacts_userinfo_even_in_an_unparsable_url() -> None:
    text = VAULT_STORE.describe(spec(endpoint="https://u:pa ss@[bad:url", token="t"))
    assert "pa ss" not in text


def test_describe_marks_dynamic_and_drops_parameters() -> None:
    text = VAULT_STORE.describe(
        spec(dynamic=True, key="pki/issue/web?common_name=a.test", token="t")
    )
    assert text == f"vault {ADDR} pki/issue/web (dynamic)"


def test_discovery_does_not_import_hvac() -> None:
    import subprocess
    import sys

    code = (
        "import sys, dynconf_store_vault.plugin as p; p.dynconf_stores(); "
        "print('hvac' in sys.modules, 'requests' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
