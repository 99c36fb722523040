"""validate(): every refusal with the fix named; describe() never carries a credential."""

from __future__ import annotations

import pytest

from dynconf.errors import BackendError
from dynconf.plugins import discover
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_s3 import S3_STORE

pytestmark = pytest.mark.s3


def spec(**fields):
    fields.setdefault("endpoint", "myapp-config")
    fields.setdefault("key", "prod/db.json")
    return StoreSpec.from_inputs(source="s3", **fields)


def test_a_plain_spec_is_accepted():
    assert S3_STORE.validate(spec()) == []
    assert S3_STORE.validate(spec(api_url="http://minio.infra.svc:9000")) == []
    assert (
        S3_STORE.validate(spec(api_url="https://s3.example", tls=TlsSettings(ca_file="/ca.pem")))
        == []
    )


@pytest.mark.parametrize(
    ("endpoint", "phrase"),
    [
        ("", "needs --endpoint"),
        ("https://s3.amazonaws.com/myapp-config", "put a server URL in --api-url"),
        ("My_Bucket", "not a valid bucket name"),
        ("ab", "not a valid bucket name"),
        ("192.168.1.1", "not a valid bucket name"),
    ],
)
def test_endpoint_must_be_a_bucket_name(endpoint, phrase):
    assert any(phrase in r for r in S3_STORE.validate(spec(endpoint=endpoint)))


@pytest.mark.parametrize(
    ("key", "phrase"),
    [("", "needs --key"), ("prod/", "is a folder"), ("prod/db", "no extension")],
)
def test_key_refusals(key, phrase):
    assert any(phrase in r for r in S3_STORE.validate(spec(key=key)))


def test_format_setting_allows_a_key_without_extension():
    assert S3_STORE.validate(spec(key="prod/db", extra={"format": "yaml"})) == []
    assert any("format=xml" in r for r in S3_STORE.validate(spec(extra={"format": "xml"})))


def test_client_certificate_is_refused_by_name_pointing_at_the_ca():
    refusals = S3_STORE.validate(spec(tls=TlsSettings(cert_file="/c.pem", key_file="/k.pem")))
    assert any("cannot present a client certificate" in r and "--ca" in r for r in refusals)


def test_server_name_override_is_refused_by_name():
    refusals = S3_STORE.validate(spec(api_url="https://s3.example",
                                      tls=TlsSettings(server_name="other")))  # fmt: skip
    assert any("--tls-server-name" in r for r in refusals)


def test_tls_on_a_plain_http_api_url_is_refused():
    refusals = S3_STORE.validate(
        spec(api_url="http://minio:9000", tls=TlsSettings(ca_file="/ca.pem"))
    )
    assert any("need an https:// --api-url" in r for r in refusals)


@pytest.mark.parametrize(
    ("api_url", "phrase"),
    [
        ("minio:9000", "http:// or https://"),
        ("http://", "names no host"),
        ("http://AKIA:s3cr3t@minio:9000", "carries credentials"),
    ],
)
def test_api_url_refusals(api_url, phrase):
    refusals = S3_STORE.validate(spec(api_url=api_url))
    assert any(phrase in r for r in refusals)
    assert "s3cr3t" not in " ".join(refusals)


@pytest.mark.parametrize(
    "fields",
    [
        {"auth": "token"},
        {"token": "t"},
        {"password": "p"},
        {"auth_role": "r"},
        {"auth_token_path": "/t"},
    ],
)
def test_credential_inputs_are_refused_because_the_aws_chain_supplies_them(fields):
    assert S3_STORE.validate(spec(**fields)), fields


def test_describe_names_the_api_url_bucket_and_key_without_credentials():
    assert S3_STORE.describe(spec()) == "s3 myapp-config/prod/db.json"
    assert S3_STORE.describe(spec(api_url="http://minio:9000/")) == (
        "s3 http://minio:9000 myapp-config/prod/db.json"
    )
    assert "s3cr3t" not in S3_STORE.describe(spec(api_url="http://k:s3cr3t@[bad"))


def test_build_refuses_what_validate_refuses():
    with pytest.raises(BackendError, match="is a folder"):
        S3_STORE.build(spec(key="prod/"))


def test_store_is_discovered_through_its_entry_point():
    assert discover().store("s3") is S3_STORE
