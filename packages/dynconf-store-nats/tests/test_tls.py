"""TLS to a nats-server that serves a private CA's certificate and verifies client ones."""

from __future__ import annotations

import pytest
from natskit import admin, bucket, client_tls, run, source

from dynconf.errors import RemoteError
from dynconf.stores import Fetched, TlsSettings

pytestmark = pytest.mark.nats

KEY = "tlsb/app/config.json"


@pytest.fixture
def tls_nats(own_nats, pki):
    server = own_nats(
        "tls {\n"
        f'  cert_file: "{pki.server_cert}"\n  key_file: "{pki.server_key}"\n'
        f'  ca_file: "{pki.ca}"\n  verify: true\n  timeout: 2\n'
        "}\n",
        name="tls",
    )
    import ssl

    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client_cert), str(pki.client_key))

    async def seed():
        client = await admin(f"nats://localhost:{server.port}", tls=context)
        kv = await bucket(client, "tlsb")
        await kv.put("app/config.json", b'{"tls": true}')
        await client.close()

    run(seed)
    return server


def _fetch(url, tls, **fields):
    async def scenario():
        src = source(url, KEY, tls=tls, timeout=3, **fields)
        try:
            return await src.fetch()
        finally:
            await src.aclose()

    return run(scenario)


def test_private_ca_and_client_certificate_read_the_key(tls_nats, pki):
    answer = _fetch(f"nats://localhost:{tls_nats.port}", client_tls(pki))
    assert isinstance(answer, Fetched)
    assert answer.text == '{"tls": true}'


def test_tls_scheme_is_accepted(tls_nats, pki):
    assert isinstance(_fetch(f"tls://localhost:{tls_nats.port}", client_tls(pki)), Fetched)


def test_server_name_override_verifies_against_that_name(tls_nats, pki):
    # the certificate names localhost and nats.test, never 127.0.0.1
    with pytest.raises(RemoteError, match="TLS"):
        _fetch(tls_nats.url, client_tls(pki))
    answer = _fetch(tls_nats.url, client_tls(pki, server_name="nats.test"))
    assert isinstance(answer, Fetched)


def test_wrong_ca_is_a_remote_tls_error(tls_nats, pki):
    with pytest.raises(RemoteError, match="TLS handshake"):
        _fetch(f"nats://localhost:{tls_nats.port}", client_tls(pki, ca_file=str(pki.other_ca)))


def test_missing_client_certificate_is_refused_by_the_server(tls_nats, pki):
    with pytest.raises(RemoteError):
        _fetch(f"nats://localhost:{tls_nats.port}", TlsSettings(ca_file=str(pki.ca)))


def test_tls_material_for_a_server_without_tls_is_refused_not_ignored(nats_server, pki):
    with pytest.raises(RemoteError, match="does not require TLS"):
        _fetch(nats_server.url, TlsSettings(ca_file=str(pki.ca)))


def test_ca_file_that_does_not_exist_is_named(tls_nats, pki, tmp_path):
    missing = tmp_path / "gone.pem"
    with pytest.raises(RemoteError, match=str(missing)):
        _fetch(f"nats://localhost:{tls_nats.port}", client_tls(pki, ca_file=str(missing)))


def test_trust_files_are_read_again_when_the_source_is_rebuilt(tls_nats, pki, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(pki.other_ca.read_bytes())
    url = f"nats://localhost:{tls_nats.port}"
    with pytest.raises(RemoteError):
        _fetch(url, client_tls(pki, ca_file=str(ca)))
    ca.write_bytes(pki.ca.read_bytes())  # the CA ConfigMap was updated
    assert isinstance(_fetch(url, client_tls(pki, ca_file=str(ca))), Fetched)


def test_key_material_never_appears_in_tls_errors(tls_nats, pki, tmp_path):
    bad = tmp_path / "not-a-key.pem"
    bad.write_text(
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(RemoteError) as caught:
        _fetch(f"nats://localhost:{tls_nats.port}", client_tls(pki, key_file=str(bad)))
    assert "c2VjcmV0LWtleS1ieXRlcw" not in str(caught.value)
    assert "not PEM material" in str(caught.value)
