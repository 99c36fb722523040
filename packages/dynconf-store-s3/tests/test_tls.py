"""HTTPS to an S3 server with a private CA; client certificates are refused by name."""

from __future__ import annotations

import pytest
from s3kit import s3_source

from dynconf.errors import RemoteError
from dynconf.stores import Fetched, TlsSettings

pytestmark = pytest.mark.s3

KEY = "prod/db.json"


@pytest.fixture
def tls_moto(own_moto, pki, aws_env):
    import boto3

    server = own_moto(cert=pki.server_cert, key=pki.server_key)
    client = boto3.client(
        "s3", endpoint_url=server.url, region_name="us-east-1", verify=str(pki.ca)
    )
    client.create_bucket(Bucket="tls-bucket")
    client.put_object(Bucket="tls-bucket", Key=KEY, Body=b'{"tls": true}')
    return server


def test_private_ca_file_reads_the_object(tls_moto, pki):
    source = s3_source(
        "tls-bucket", KEY, api_url=tls_moto.url, tls=TlsSettings(ca_file=str(pki.ca))
    )
    answer = source.fetch()
    assert isinstance(answer, Fetched)
    assert answer.text == '{"tls": true}'


def test_without_the_private_ca_the_handshake_is_refused(tls_moto):
    with pytest.raises(RemoteError, match="TLS handshake"):
        s3_source("tls-bucket", KEY, api_url=tls_moto.url, timeout=2).fetch()


def test_wrong_ca_is_a_remote_tls_error(tls_moto, pki):
    source = s3_source("tls-bucket", KEY, api_url=tls_moto.url, timeout=2,
                       tls=TlsSettings(ca_file=str(pki.other_ca)))  # fmt: skip
    with pytest.raises(RemoteError, match="TLS handshake"):
        source.fetch()


def test_ca_file_that_does_not_exist_is_named(tls_moto, tmp_path):
    missing = tmp_path / "gone.pem"
    source = s3_source(
        "tls-bucket", KEY, api_url=tls_moto.url, tls=TlsSettings(ca_file=str(missing))
    )
    with pytest.raises(RemoteError, match=str(missing)):
        source.fetch()


def test_trust_file_is_read_again_when_the_source_is_rebuilt(tls_moto, pki, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(pki.other_ca.read_bytes())
    tls = TlsSettings(ca_file=str(ca))
    with pytest.raises(RemoteError):
        s3_source("tls-bucket", KEY, api_url=tls_moto.url, tls=tls, timeout=2).fetch()
    ca.write_bytes(pki.ca.read_bytes())
    assert isinstance(s3_source("tls-bucket", KEY, api_url=tls_moto.url, tls=tls).fetch(), Fetched)
