"""Each auth method against a real OpenBao (LDAP against slapd), and the token lifecycle."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from vault_testlib import SpecFactory, make_signing_key, sign_jwt

from dynconf.errors import AuthError
from dynconf.stores import Fetched
from dynconf_store_vault import VAULT_STORE

pytestmark = pytest.mark.vault


def seed(vault_server: Any, name: str) -> None:
    vault_server.client.secrets.kv.v2.create_or_update_secret(name, secret={"owner": name})


def fetched_owner(source: Any) -> str:
    answer = source.fetch()
    assert isinstance(answer, Fetched)
    return str(json.loads(answer.text)["owner"])


def approle(vault_server: Any, mount: str, policies: list[str], **role: Any) -> tuple[str, str]:
    client = vault_server.client
    client.auth.approle.create_or_update_approle(
        "app", token_policies=policies, mount_point=mount, **role
    )
    role_id = client.auth.approle.read_role_id("app", mount_point=mount)["data"]["role_id"]
    secret_id = client.auth.approle.generate_secret_id("app", mount_point=mount)["data"][
        "secret_id"
    ]
    return role_id, secret_id


# ---------------------------------------------------------------------------- token
def test_token_reads_with_a_supplied_token(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, name: str
) -> None:
    seed(vault_server, name)
    token = vault_server.client.auth.token.create(policies=[read_policy], ttl="1h")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", token=token["auth"]["client_token"]))
    assert fetched_owner(source) == name
    assert source.keeper.logins == 1  # one lookup-self for the TTL


def test_renewable_supplied_token_is_renewed_near_expiry(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, name: str
) -> None:
    seed(vault_server, name)
    # a 30 s token is inside the 60 s margin from the start: every request renews it
    token = vault_server.client.auth.token.create(
        policies=[read_policy], ttl="30s", explicit_max_ttl="10m", renewable=True
    )
    source = VAULT_STORE.build(spec_for(f"secret/{name}", token=token["auth"]["client_token"]))
    fetched_owner(source)
    fetched_owner(source)
    assert source.keeper.renewals >= 1


def test_revoked_supplied_token_is_an_auth_error_without_retry(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, name: str
) -> None:
    seed(vault_server, name)
    token = vault_server.client.auth.token.create(policies=[read_policy], ttl="1h")
    secret = token["auth"]["client_token"]
    source = VAULT_STORE.build(spec_for(f"secret/{name}", token=secret))
    fetched_owner(source)
    vault_server.client.auth.token.revoke(secret)
    with pytest.raises(AuthError, match="supplied token"):
        source.fetch()


def test_supplied_token_without_policy_is_an_auth_error(
    vault_server: Any, spec_for: SpecFactory, name: str
) -> None:
    seed(vault_server, name)
    token = vault_server.client.auth.token.create(policies=["default"], ttl="1h")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", token=token["auth"]["client_token"]))
    with pytest.raises(AuthError, match="policy"):
        source.fetch()


# ---------------------------------------------------------------------------- approle
def test_approle_logs_in_with_role_id_and_secret_id(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    mount = enabled_auth("approle")
    role_id, secret_id = approle(vault_server, mount, [read_policy])
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="approle", auth_mount=mount,
                                        auth_role=role_id, password=secret_id))
    assert fetched_owner(source) == name
    assert source.keeper.logins == 1


def test_approle_wrong_secret_id_is_an_auth_error(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    mount = enabled_auth("approle")
    role_id, _ = approle(vault_server, mount, [read_policy])
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="approle", auth_mount=mount,
                                        auth_role=role_id, password="not-the-secret-id"))
    with pytest.raises(AuthError, match="refused the approle login"):
        source.fetch()


def test_non_renewable_token_near_expiry_is_replaced_by_a_fresh_login(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    mount = enabled_auth("approle")
    # batch tokens are never renewable; 30 s is inside the 60 s margin
    role_id, secret_id = approle(vault_server, mount, [read_policy], token_ttl="30s",
                                 token_type="batch")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="approle", auth_mount=mount,
                                        auth_role=role_id, password=secret_id))
    fetched_owner(source)
    fetched_owner(source)
    assert source.keeper.logins == 2
    assert source.keeper.renewals == 0


def test_renewable_login_token_near_expiry_is_renewed_not_replaced(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    mount = enabled_auth("approle")
    role_id, secret_id = approle(vault_server, mount, [read_policy], token_ttl="30s",
                                 token_max_ttl="10m")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="approle", auth_mount=mount,
                                        auth_role=role_id, password=secret_id))
    for _ in range(3):
        fetched_owner(source)
    assert source.keeper.logins == 1
    assert source.keeper.renewals >= 2


def test_a_403_triggers_exactly_one_fresh_login_and_retry(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    mount = enabled_auth("approle")
    role_id, secret_id = approle(vault_server, mount, [read_policy])
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="approle", auth_mount=mount,
                                        auth_role=role_id, password=secret_id))
    fetched_owner(source)
    # Vault revokes every token this mount issued: the held token now answers 403
    vault_server.client.sys.revoke_prefix(f"auth/{mount}/login")
    assert fetched_owner(source) == name
    assert source.keeper.login_attempts == 2


def test_a_second_403_after_a_fresh_login_is_reported_as_a_policy_problem(
    vault_server: Any, spec_for: SpecFactory, policy: Any, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    other = policy(f"other-{name}", 'path "secret/data/elsewhere" { capabilities = ["read"] }')
    mount = enabled_auth("approle")
    role_id, secret_id = approle(vault_server, mount, [other])
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="approle", auth_mount=mount,
                                        auth_role=role_id, password=secret_id))
    with pytest.raises(AuthError, match="policy problem"):
        source.fetch()
    assert source.keeper.login_attempts == 2


# ---------------------------------------------------------------------------- userpass / ldap
def test_userpass_logs_in_with_username_and_password(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    mount = enabled_auth("userpass")
    vault_server.client.auth.userpass.create_or_update_user(
        "svc-billing", "pw-" + name, policies=[read_policy], mount_point=mount
    )
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="userpass", auth_mount=mount,
                                        auth_username="svc-billing", password="pw-" + name))
    assert fetched_owner(source) == name


def test_userpass_wrong_password_is_an_auth_error(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    mount = enabled_auth("userpass")
    vault_server.client.auth.userpass.create_or_update_user(
        "svc-billing", "right", policies=[read_policy], mount_point=mount
    )
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="userpass", auth_mount=mount,
                                        auth_username="svc-billing", password="wrong"))
    with pytest.raises(AuthError):
        source.fetch()


def _has_auth_plugin(vault_server: Any, plugin: str) -> bool:
    catalog = vault_server.client.read("sys/plugins/catalog")["data"]
    return plugin in catalog.get("auth", [])


@pytest.mark.ldap
def test_ldap_logs_in_against_slapd(
    vault_server: Any, ldap_server: Any, spec_for: SpecFactory, read_policy: str,
    enabled_auth: Any, name: str,
) -> None:
    if not _has_auth_plugin(vault_server, "ldap"):
        pytest.skip(
            "this OpenBao build has no ldap auth plugin (OpenBao moved it to openbao-plugins, "
            "which no registry here serves); test_ldap_login_speaks_the_ldap_wire_shape covers "
            "the request"
        )
    seed(vault_server, name)
    mount = enabled_auth("ldap")
    client = vault_server.client
    client.write(
        f"auth/{mount}/config", url=ldap_server.url, userdn=ldap_server.users_dn, userattr="uid",
        binddn=ldap_server.bind_dn, bindpass=ldap_server.bind_password,
        groupdn=ldap_server.groups_dn, groupattr="cn",
        groupfilter="(&(objectClass=groupOfNames)(member={{.UserDN}}))",
    )
    client.write(f"auth/{mount}/groups/cfg-readers", policies=read_policy)
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="ldap", auth_mount=mount,
                                        auth_username=ldap_server.user,
                                        password=ldap_server.user_password))
    assert fetched_owner(source) == name
    wrong = VAULT_STORE.build(spec_for(f"secret/{name}", auth="ldap", auth_mount=mount,
                                       auth_username=ldap_server.user, password="wrong"))
    with pytest.raises(AuthError):
        wrong.fetch()


def test_ldap_login_speaks_the_ldap_wire_shape(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, name: str
) -> None:
    # Vault's ldap and userpass logins share one shape (POST auth/<mount>/login/<user> with
    # {password}); a userpass backend mounted where the ldap method looks proves the request
    # on a server that lacks the ldap plugin.
    seed(vault_server, name)
    mount = f"ldap-{name}"
    vault_server.client.sys.enable_auth_method("userpass", path=mount)
    vault_server.client.auth.userpass.create_or_update_user(
        "svc-billing", "pw-" + name, policies=[read_policy], mount_point=mount
    )
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="ldap", auth_mount=mount,
                                        auth_username="svc-billing", password="pw-" + name))
    assert fetched_owner(source) == name


# ---------------------------------------------------------------------------- jwt
@pytest.fixture
def jwt_mount(
    vault_server: Any, enabled_auth: Any, read_policy: str, tmp_path: Path
) -> tuple[str, Path]:
    key, public = make_signing_key(tmp_path)
    mount = enabled_auth("jwt")
    client = vault_server.client
    client.write(f"auth/{mount}/config", jwt_validation_pubkeys=[public],
                 bound_issuer="https://issuer.test")
    client.write(f"auth/{mount}/role/myapp", role_type="jwt", user_claim="sub",
                 bound_audiences=["dynconf"], token_policies=[read_policy], token_ttl="1h")
    return mount, key


def claims(sub: str = "billing", aud: str = "dynconf") -> dict[str, Any]:
    now = int(time.time())
    return {"iss": "https://issuer.test", "sub": sub, "aud": aud, "iat": now, "nbf": now - 5,
            "exp": now + 600}


def test_jwt_from_the_token_slot_with_a_role(
    vault_server: Any, spec_for: SpecFactory, jwt_mount: tuple[str, Path], name: str
) -> None:
    seed(vault_server, name)
    mount, key = jwt_mount
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="jwt", auth_mount=mount,
                                        auth_role="myapp", token=sign_jwt(key, claims())))
    assert fetched_owner(source) == name


def test_jwt_without_role_uses_the_mounts_default_role(
    vault_server: Any, spec_for: SpecFactory, jwt_mount: tuple[str, Path], name: str
) -> None:
    seed(vault_server, name)
    mount, key = jwt_mount
    vault_server.client.write(f"auth/{mount}/config", default_role="myapp",
                              jwt_validation_pubkeys=[vault_server.client.read(
                                  f"auth/{mount}/config")["data"]["jwt_validation_pubkeys"][0]],
                              bound_issuer="https://issuer.test")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="jwt", auth_mount=mount,
                                        token=sign_jwt(key, claims())))
    assert fetched_owner(source) == name


def test_jwt_file_is_re_read_at_every_login(
    vault_server: Any, spec_for: SpecFactory, jwt_mount: tuple[str, Path], name: str,
    tmp_path: Path,
) -> None:
    seed(vault_server, name)
    mount, key = jwt_mount
    jwt_file = tmp_path / "jwt"
    jwt_file.write_text(sign_jwt(key, claims()) + "\n")
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="jwt", auth_mount=mount,
                                        auth_role="myapp", auth_token_path=str(jwt_file)))
    assert fetched_owner(source) == name
    # the issuer rewrites the file with a JWT for another audience; the next login reads it
    jwt_file.write_text(sign_jwt(key, claims(aud="someone-else")))
    vault_server.client.sys.revoke_prefix(f"auth/{mount}/login")
    with pytest.raises(AuthError, match="refused the jwt login"):
        source.fetch()
    assert source.keeper.login_attempts == 2


def test_jwt_with_a_wrong_audience_is_an_auth_error(
    vault_server: Any, spec_for: SpecFactory, jwt_mount: tuple[str, Path], name: str
) -> None:
    mount, key = jwt_mount
    source = VAULT_STORE.build(spec_for(f"secret/{name}", auth="jwt", auth_mount=mount,
                                        auth_role="myapp",
                                        token=sign_jwt(key, claims(aud="other"))))
    with pytest.raises(AuthError):
        source.fetch()
