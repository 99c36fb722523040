"""Each auth method against a real OpenBao (LDAP: HashiCorp Vault and slapd), and the token lifecycle."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from vault_testlib import SpecFactory, make_signing_key, sign_jwt

from dynconf.errors import AuthError
from dynconf.stores import Fetched, StoreSpec
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
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=secret_id,
        )
    )
    assert fetched_owner(source) == name
    assert source.keeper.logins == 1


def test_approle_wrong_secret_id_is_an_auth_error(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    mount = enabled_auth("approle")
    role_id, _ = approle(vault_server, mount, [read_policy])
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password="not-the-secret-id",
        )
    )
    with pytest.raises(AuthError, match="refused the approle login"):
        source.fetch()


def test_non_renewable_token_near_expiry_is_replaced_by_a_fresh_login(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    mount = enabled_auth("approle")
    # batch tokens are never renewable; 30 s is inside the 60 s margin
    role_id, secret_id = approle(
        vault_server, mount, [read_policy], token_ttl="30s", token_type="batch"
    )
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=secret_id,
        )
    )
    fetched_owner(source)
    fetched_owner(source)
    assert source.keeper.logins == 2
    assert source.keeper.renewals == 0


def test_renewable_login_token_near_expiry_is_renewed_not_replaced(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    seed(vault_server, name)
    mount = enabled_auth("approle")
    role_id, secret_id = approle(
        vault_server, mount, [read_policy], token_ttl="30s", token_max_ttl="10m"
    )
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=secret_id,
        )
    )
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
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=secret_id,
        )
    )
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
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="approle",
            auth_mount=mount,
            auth_role=role_id,
            password=secret_id,
        )
    )
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
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="userpass",
            auth_mount=mount,
            auth_username="svc-billing",
            password="pw-" + name,
        )
    )
    assert fetched_owner(source) == name


def test_userpass_wrong_password_is_an_auth_error(
    vault_server: Any, spec_for: SpecFactory, read_policy: str, enabled_auth: Any, name: str
) -> None:
    mount = enabled_auth("userpass")
    vault_server.client.auth.userpass.create_or_update_user(
        "svc-billing", "right", policies=[read_policy], mount_point=mount
    )
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="userpass",
            auth_mount=mount,
            auth_username="svc-billing",
            password="wrong",
        )
    )
    with pytest.raises(AuthError):
        source.fetch()


# ---------------------------------------------------------------------------- ldap (slapd)
# OpenBao has no ldap auth method (it moved to openbao-plugins, which no registry here serves):
# these run on HashiCorp Vault, built from the Go module proxy (`scripts/testenv` vault-hashicorp).
AGENT = Path(sys.executable).with_name("dynamic-config-agent")
PLANTED_LDAP_PASSWORD = "ldap-password-planted-c41d7e"


@dataclass(frozen=True)
class LdapMount:
    """An ldap auth mount on HashiCorp Vault bound to slapd; ``cfg-readers`` may read ``key``."""

    addr: str
    mount: str
    key: str
    user: str
    password: str = field(repr=False)

    def spec(self, **fields: Any) -> StoreSpec:
        fields.setdefault("password", self.password)
        return StoreSpec.from_inputs(
            source="vault",
            endpoint=self.addr,
            key=self.key,
            auth="ldap",
            auth_mount=self.mount,
            auth_username=self.user,
            **fields,
        )

    def agent(self, out: Path, password: str) -> subprocess.CompletedProcess[str]:
        """``dynamic-config-agent --source vault --auth ldap``, rendering once; password from env."""
        env = {**os.environ, "DYNAMIC_CONFIG_AGENT_PASSWORD": password}
        env.pop("DYNAMIC_CONFIG_AGENT_TOKEN", None)
        env.pop("DYNCONF_PLUGIN_LOCK", None)
        return subprocess.run(
            [
                str(AGENT),
                "--source",
                "vault",
                "--endpoint",
                self.addr,
                "--key",
                self.key,
                "--out",
                str(out),
                "--auth",
                "ldap",
                "--auth-mount",
                self.mount,
                "--auth-username",
                self.user,
                "--timeout",
                "10",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
def ldap_mount(vault_hashicorp_server: Any, ldap_server: Any, name: str) -> Iterator[LdapMount]:
    client = vault_hashicorp_server.client
    client.secrets.kv.v2.create_or_update_secret(name, secret={"owner": name})
    policy = f"read-{name}"
    client.sys.create_or_update_policy(
        name=policy,
        policy=f'path "secret/data/{name}" {{ capabilities = ["read"] }}\n'
        f'path "secret/metadata/{name}" {{ capabilities = ["read"] }}\n',
    )
    mount = f"ldap-{name}"
    client.sys.enable_auth_method("ldap", path=mount)
    client.write(
        f"auth/{mount}/config",
        url=ldap_server.url,
        userdn=ldap_server.users_dn,
        userattr="uid",
        binddn=ldap_server.bind_dn,
        bindpass=ldap_server.bind_password,
        groupdn=ldap_server.groups_dn,
        groupattr="cn",
        groupfilter="(&(objectClass=groupOfNames)(member={{.UserDN}}))",
    )
    client.write(f"auth/{mount}/groups/cfg-readers", policies=policy)
    try:
        yield LdapMount(
            addr=vault_hashicorp_server.addr,
            mount=mount,
            key=f"secret/{name}",
            user=ldap_server.user,
            password=ldap_server.user_password,
        )
    finally:
        client.sys.disable_auth_method(mount)
        client.secrets.kv.v2.delete_metadata_and_all_versions(name)


@pytest.mark.ldap
def test_ldap_logs_in_against_slapd(ldap_mount: LdapMount, name: str) -> None:
    # the read policy reaches the token only through alice's cfg-readers group in slapd
    source = VAULT_STORE.build(ldap_mount.spec())
    assert fetched_owner(source) == name
    assert source.keeper.logins == 1


@pytest.mark.ldap
def test_agent_renders_with_auth_ldap_and_the_password_from_the_environment(
    ldap_mount: LdapMount, name: str, tmp_path: Path
) -> None:
    out = tmp_path / "app.json"
    result = ldap_mount.agent(out, ldap_mount.password)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(out.read_text()) == {"owner": name}
    assert ldap_mount.password not in result.stdout + result.stderr


@pytest.mark.ldap
def test_ldap_wrong_password_is_an_auth_error_that_never_shows_it(
    ldap_mount: LdapMount, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    spec = ldap_mount.spec(password=PLANTED_LDAP_PASSWORD)
    source = VAULT_STORE.build(spec)
    with pytest.raises(AuthError, match="refused the ldap login") as refused:
        source.fetch()
    assert source.keeper.logins == 0
    texts = [
        str(refused.value),
        repr(refused.value),
        "".join(traceback.format_exception(refused.value)),
        repr(spec),
        source.describe(),
        repr(source.keeper),
        caplog.text,
    ]
    result = ldap_mount.agent(tmp_path / "app.json", PLANTED_LDAP_PASSWORD)
    assert result.returncode != 0
    assert "ldap" in result.stdout + result.stderr
    assert not (tmp_path / "app.json").exists()
    texts += [result.stdout, result.stderr]
    everything = "\n".join(texts)
    assert PLANTED_LDAP_PASSWORD not in everything
    assert ldap_mount.password not in everything


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
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="ldap",
            auth_mount=mount,
            auth_username="svc-billing",
            password="pw-" + name,
        )
    )
    assert fetched_owner(source) == name


# ---------------------------------------------------------------------------- jwt
@pytest.fixture
def jwt_mount(
    vault_server: Any, enabled_auth: Any, read_policy: str, tmp_path: Path
) -> tuple[str, Path]:
    key, public = make_signing_key(tmp_path)
    mount = enabled_auth("jwt")
    client = vault_server.client
    client.write(
        f"auth/{mount}/config", jwt_validation_pubkeys=[public], bound_issuer="https://issuer.test"
    )
    client.write(
        f"auth/{mount}/role/myapp",
        role_type="jwt",
        user_claim="sub",
        bound_audiences=["dynconf"],
        token_policies=[read_policy],
        token_ttl="1h",
    )
    return mount, key


def claims(sub: str = "billing", aud: str = "dynconf") -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": "https://issuer.test",
        "sub": sub,
        "aud": aud,
        "iat": now,
        "nbf": now - 5,
        "exp": now + 600,
    }


def test_jwt_from_the_token_slot_with_a_role(
    vault_server: Any, spec_for: SpecFactory, jwt_mount: tuple[str, Path], name: str
) -> None:
    seed(vault_server, name)
    mount, key = jwt_mount
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="jwt",
            auth_mount=mount,
            auth_role="myapp",
            token=sign_jwt(key, claims()),
        )
    )
    assert fetched_owner(source) == name


def test_jwt_without_role_uses_the_mounts_default_role(
    vault_server: Any, spec_for: SpecFactory, jwt_mount: tuple[str, Path], name: str
) -> None:
    seed(vault_server, name)
    mount, key = jwt_mount
    vault_server.client.write(
        f"auth/{mount}/config",
        default_role="myapp",
        jwt_validation_pubkeys=[
            vault_server.client.read(f"auth/{mount}/config")["data"]["jwt_validation_pubkeys"][0]
        ],
        bound_issuer="https://issuer.test",
    )
    source = VAULT_STORE.build(
        spec_for(f"secret/{name}", auth="jwt", auth_mount=mount, token=sign_jwt(key, claims()))
    )
    assert fetched_owner(source) == name


def test_jwt_file_is_re_read_at_every_login(
    vault_server: Any,
    spec_for: SpecFactory,
    jwt_mount: tuple[str, Path],
    name: str,
    tmp_path: Path,
) -> None:
    seed(vault_server, name)
    mount, key = jwt_mount
    jwt_file = tmp_path / "jwt"
    jwt_file.write_text(sign_jwt(key, claims()) + "\n")
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="jwt",
            auth_mount=mount,
            auth_role="myapp",
            auth_token_path=str(jwt_file),
        )
    )
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
    source = VAULT_STORE.build(
        spec_for(
            f"secret/{name}",
            auth="jwt",
            auth_mount=mount,
            auth_role="myapp",
            token=sign_jwt(key, claims(aud="other")),
        )
    )
    with pytest.raises(AuthError):
        source.fetch()
