"""TLS against an OpenBao with a TLS listener: private CA, server name, cert auth."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from vault_testlib import TlsBao

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import Fetched, StoreSpec, TlsSettings
from dynconf_store_vault import VAULT_STORE

pytestmark = pytest.mark.vault


@pytest.fixture(scope="module")
def cert_role(tls_bao: TlsBao) -> str:
    """Cert auth at ``cert/`` trusting the client CA for CN billing.default, and a secret."""
    tls_bao.call("POST", "sys/auth/cert", {"type": "cert"})
    tls_bao.call(
        "PUT",
        "sys/policies/acl/cert-read",
        {"policy": 'path "secret/data/tls-app" { capabilities = ["read"] }'},
    )
    tls_bao.call("POST", "auth/cert/certs/myapp", {
        "certificate": tls_bao.pki.client_ca.read_text(),
        "allowed_common_names": ["billing.default"],
        "token_policies": ["cert-read"],
    })  # fmt: skip
    tls_bao.call("POST", "secret/data/tls-app", {"data": {"via": "tls"}})
    return "myapp"


def spec(tls_bao: TlsBao, tls: TlsSettings, **fields: Any) -> StoreSpec:
    fields.setdefault("endpoint", tls_bao.address)
    fields.setdefault("token", tls_bao.root_token)
    return StoreSpec.from_inputs(source="vault", key="secret/tls-app", tls=tls, **fields)


def via(answer: Any) -> str:
    assert isinstance(answer, Fetched)
    return str(json.loads(answer.text)["via"])


def test_private_ca_verifies_the_server(tls_bao: TlsBao, cert_role: str) -> None:
    source = VAULT_STORE.build(spec(tls_bao, TlsSettings(ca_file=str(tls_bao.pki.ca))))
    assert via(source.fetch()) == "tls"


def test_without_the_private_ca_the_handshake_fails_as_remote(
    tls_bao: TlsBao, cert_role: str
) -> None:
    source = VAULT_STORE.build(spec(tls_bao, TlsSettings()))
    with pytest.raises(RemoteError, match="TLS handshake"):
        source.fetch()


def test_server_name_override_is_what_gets_verified(tls_bao: TlsBao, cert_role: str) -> None:
    ca = str(tls_bao.pki.ca)
    good = VAULT_STORE.build(spec(tls_bao, TlsSettings(ca_file=ca, server_name="vault.test")))
    assert via(good.fetch()) == "tls"
    bad = VAULT_STORE.build(spec(tls_bao, TlsSettings(ca_file=ca, server_name="other.test")))
    with pytest.raises(RemoteError, match="TLS handshake"):
        bad.fetch()


def test_skip_verify_is_honoured(tls_bao: TlsBao, cert_role: str) -> None:
    source = VAULT_STORE.build(spec(tls_bao, TlsSettings(skip_verify=True)))
    assert via(source.fetch()) == "tls"


def client_tls(tls_bao: TlsBao, *, stranger: bool = False) -> TlsSettings:
    pki = tls_bao.pki
    cert, key = (
        (pki.stranger_cert, pki.stranger_key) if stranger else (pki.client_cert, pki.client_key)
    )
    return TlsSettings(ca_file=str(pki.ca), cert_file=str(cert), key_file=str(key))


def test_cert_auth_logs_in_with_the_client_certificate(tls_bao: TlsBao, cert_role: str) -> None:
    source = VAULT_STORE.build(
        spec(tls_bao, client_tls(tls_bao), auth="cert", auth_role=cert_role, token=None)
    )
    assert via(source.fetch()) == "tls"
    assert source.keeper.logins == 1


def test_cert_auth_without_role_lets_the_mount_pick_by_certificate(
    tls_bao: TlsBao, cert_role: str
) -> None:
    source = VAULT_STORE.build(spec(tls_bao, client_tls(tls_bao), auth="cert", token=None))
    assert via(source.fetch()) == "tls"


def test_cert_auth_with_an_untrusted_certificate_is_an_auth_error(
    tls_bao: TlsBao, cert_role: str
) -> None:
    source = VAULT_STORE.build(
        spec(tls_bao, client_tls(tls_bao, stranger=True), auth="cert", token=None)
    )
    with pytest.raises(AuthError, match="refused the cert login"):
        source.fetch()


def test_trust_files_are_read_again_by_a_rebuilt_source(
    tls_bao: TlsBao, cert_role: str, tmp_path: Any
) -> None:
    ca_file = tmp_path / f"ca-{uuid.uuid4().hex}.crt"
    ca_file.write_text(tls_bao.pki.client_ca.read_text())  # the wrong CA first
    settings = TlsSettings(ca_file=str(ca_file))
    with pytest.raises(RemoteError):
        VAULT_STORE.build(spec(tls_bao, settings)).fetch()
    ca_file.write_text(tls_bao.pki.ca.read_text())  # rotated in place
    assert via(VAULT_STORE.build(spec(tls_bao, settings)).fetch()) == "tls"
