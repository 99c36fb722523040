"""TLS: the server on a private CA, with and without client certificates."""

from __future__ import annotations

import json

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import TlsSettings

from .conftest import base_settings, client_source

pytestmark = pytest.mark.configserver


def test_client_trusts_the_private_ca(serve, config_dir, pki):
    raw = base_settings(config_dir, tls={"certificate": str(pki.server_cert),
                                         "key": str(pki.server_key)})  # fmt: skip
    server = serve(raw, base=config_dir.root, scheme="https")
    source = client_source(server.url, tls=TlsSettings(ca_file=str(pki.ca)))
    assert json.loads(source.fetch().text)["db"]["host"] == "db.prod"
    with pytest.raises(RemoteError, match="TLS handshake"):
        client_source(server.url, tls=TlsSettings(ca_file=str(pki.other_ca))).fetch()


def test_server_name_override_is_verified(serve, config_dir, pki):
    raw = base_settings(config_dir, tls={"certificate": str(pki.server_cert),
                                         "key": str(pki.server_key)})  # fmt: skip
    server = serve(raw, base=config_dir.root, scheme="https")
    good = TlsSettings(ca_file=str(pki.ca), server_name="config.test")
    assert client_source(server.url, tls=good).fetch()
    bad = TlsSettings(ca_file=str(pki.ca), server_name="elsewhere.test")
    with pytest.raises(RemoteError):
        client_source(server.url, tls=bad).fetch()


def test_mutual_tls_needs_the_client_certificate(serve, config_dir, pki):
    raw = base_settings(config_dir, tls={"certificate": str(pki.server_cert),
                                         "key": str(pki.server_key),
                                         "client_ca": str(pki.ca)})  # fmt: skip
    server = serve(raw, base=config_dir.root, scheme="https")
    with_cert = TlsSettings(ca_file=str(pki.ca), cert_file=str(pki.client_cert),
                            key_file=str(pki.client_key))  # fmt: skip
    assert client_source(server.url, tls=with_cert).fetch()
    with pytest.raises(RemoteError):
        client_source(server.url, tls=TlsSettings(ca_file=str(pki.ca))).fetch()


def test_missing_trust_file_is_named_by_path(serve, config_dir, pki, tmp_path):
    missing = tmp_path / "nope.pem"
    with pytest.raises(RemoteError, match=r"nope\.pem"):
        client_source("https://127.0.0.1:1", tls=TlsSettings(ca_file=str(missing))).fetch()
