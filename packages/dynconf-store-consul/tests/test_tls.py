"""HTTPS to a Consul serving from a private CA that requires a client certificate."""

from __future__ import annotations

import uuid

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import Fetched, TlsSettings

pytestmark = pytest.mark.consul


@pytest.fixture
def seeded(tls_consul):
    key = f"tls/{uuid.uuid4().hex}/config.json"
    tls_consul.put(key, '{"tls": true}')  # over the plain port
    return key


def _tls(pki, **overrides):
    fields = {"ca_file": str(pki.ca), "cert_file": str(pki.client_cert),
              "key_file": str(pki.client_key)}  # fmt: skip
    fields.update(overrides)
    return TlsSettings(**fields)


def test_private_ca_and_client_certificate_read_the_key(tls_consul, pki, seeded, make_source):
    url = f"https://localhost:{tls_consul.https_port}"
    answer = make_source(url, seeded, tls=_tls(pki)).fetch()
    assert isinstance(answer, Fetched)
    assert answer.text == '{"tls": true}'


def test_server_name_override_verifies_against_that_name(tls_consul, pki, seeded, make_source):
    # the certificate names localhost and consul.test, never 127.0.0.1
    with pytest.raises(RemoteError, match="TLS"):
        make_source(tls_consul.https_url, seeded, tls=_tls(pki)).fetch()
    answer = make_source(tls_consul.https_url, seeded,
                         tls=_tls(pki, server_name="consul.test")).fetch()  # fmt: skip
    assert isinstance(answer, Fetched)


def test_wrong_ca_is_a_remote_tls_error(tls_consul, pki, seeded, make_source):
    url = f"https://localhost:{tls_consul.https_port}"
    with pytest.raises(RemoteError, match="TLS handshake"):
        make_source(url, seeded, tls=_tls(pki, ca_file=str(pki.other_ca))).fetch()


def test_missing_client_certificate_is_refused_by_the_agent(tls_consul, pki, seeded, make_source):
    url = f"https://localhost:{tls_consul.https_port}"
    with pytest.raises(RemoteError):
        make_source(url, seeded, tls=TlsSettings(ca_file=str(pki.ca))).fetch()


def test_ca_file_that_does_not_exist_is_named_at_build(tls_consul, pki, tmp_path, make_source):
    missing = tmp_path / "gone.pem"
    with pytest.raises(RemoteError, match=str(missing)):
        make_source(tls_consul.https_url, "a.json", tls=_tls(pki, ca_file=str(missing)))


def test_trust_files_are_read_again_when_the_source_is_rebuilt(tls_consul, pki, seeded,
                                                               make_source, tmp_path):  # fmt: skip
    ca = tmp_path / "ca.pem"
    ca.write_bytes(pki.other_ca.read_bytes())
    url = f"https://localhost:{tls_consul.https_port}"
    with pytest.raises(RemoteError):
        make_source(url, seeded, tls=_tls(pki, ca_file=str(ca))).fetch()
    ca.write_bytes(pki.ca.read_bytes())  # the CA ConfigMap was updated
    assert isinstance(make_source(url, seeded, tls=_tls(pki, ca_file=str(ca))).fetch(), Fetched)


def test_key_material_never_appears_in_tls_errors(tls_consul, pki, seeded, make_source):
    url = f"https://localhost:{tls_consul.https_port}"
    with pytest.raises(RemoteError) as caught:
        make_source(url, seeded, tls=_tls(pki, ca_file=str(pki.other_ca))).fetch()
    key_body = pki.client_key.read_text().splitlines()[1]
    assert key_body not in str(caught.value)
