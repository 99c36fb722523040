"""validate(): every refusal with the fix named; describe() never carries a credential."""

from __future__ import annotations

import pytest

from dynconf.errors import BackendError
from dynconf.plugins import discover
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_nats import NATS_STORE, credential_mode, parse_key

pytestmark = pytest.mark.nats

URL = "nats://nats.infra.svc:4222"


def spec(**fields):
    fields.setdefault("endpoint", URL)
    fields.setdefault("key", "config/db.json")
    return StoreSpec.from_inputs(source="nats", **fields)


def test_a_plain_spec_is_accepted():
    assert NATS_STORE.validate(spec()) == []
    assert NATS_STORE.validate(spec(endpoint=f"{URL}, tls://other:4222")) == []


def test_key_is_bucket_then_key():
    key = parse_key("config/myapp/settings.json")
    assert (key.bucket, key.key) == ("config", "myapp/settings.json")


@pytest.mark.parametrize(
    ("key", "phrase"),
    [
        ("db.json", "must be <bucket>/<key>"),
        ("config/", "must be <bucket>/<key>"),
        ("con fig/db.json", "not a KV bucket name"),
        ("config/app.*", "wildcard"),
        ("config/app/>", "wildcard"),
        ("config/a b.json", "not a valid KV key"),
        ("config/settings", "no extension naming the stored format"),
    ],
)
def test_key_refusals_name_the_fix(key, phrase):
    refusals = NATS_STORE.validate(spec(key=key))
    assert any(phrase in r for r in refusals), refusals


def test_unknown_format_and_setting_are_refused():
    refusals = NATS_STORE.validate(spec(extra={"format": "xml", "bucket": "x"}))
    assert any("format=xml" in r for r in refusals)
    assert any("bucket is not a setting nats reads" in r for r in refusals)


@pytest.mark.parametrize(
    ("endpoint", "phrase"),
    [
        ("", "needs --endpoint"),
        ("http://nats:4222", "nats:// or tls://"),
        ("nats://", "names no host"),
        ("nats://nats:4222/path", "has a path"),
    ],
)
def test_endpoint_refusals(endpoint, phrase):
    assert any(phrase in r for r in NATS_STORE.validate(spec(endpoint=endpoint)))


def test_credential_in_the_url_is_refused_and_redacted():
    refusals = NATS_STORE.validate(spec(endpoint="nats://s3cr3t-token@nats:4222"))
    assert any("carries a credential" in r for r in refusals)
    assert "s3cr3t-token" not in " ".join(refusals)


@pytest.mark.parametrize(
    "endpoint",
    [
        "nats://s3cr3t@nats:4222",
        "nats://user:s3cr3t@nats:4222",
        "nats://us:s3cr3t@[::1:bad",
        "nats://ok:4222,nats://s3cr3t@other:4222",
    ],
)
def test_describe_never_carries_a_credential(endpoint):
    described = NATS_STORE.describe(spec(endpoint=endpoint))
    assert "s3cr3t" not in described
    assert "bucket config key db.json" in described


def test_auth_flag_is_refused_because_the_inputs_pick_the_method():
    refusals = NATS_STORE.validate(spec(auth="token", token="t"))
    assert any("nats takes no --auth" in r for r in refusals)


def test_credential_mode_precedence_is_creds_then_token_then_none():
    assert credential_mode(spec(auth_token_path="/etc/nats/nats.creds", token="t")) == "creds"
    assert credential_mode(spec(token="t")) == "token"
    assert credential_mode(spec()) == "anonymous"


@pytest.mark.parametrize("field", ["auth_role", "auth_mount", "auth_username", "password"])
def test_inputs_nats_has_no_use_for_are_refused(field):
    refusals = NATS_STORE.validate(spec(**{field: "x"}))
    assert any("nats takes no" in r for r in refusals), refusals


def test_pem_text_instead_of_a_ca_file_is_refused():
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    refusals = NATS_STORE.validate(spec(tls=TlsSettings(ca_file=pem)))
    assert any("refuses certificate bytes" in r for r in refusals)


def test_client_certificate_without_its_key_is_refused():
    refusals = NATS_STORE.validate(spec(tls=TlsSettings(cert_file="/tls/c.pem")))
    assert any("--tls-cert needs --tls-key" in r for r in refusals)


def test_flags_of_other_stores_are_refused():
    refusals = NATS_STORE.validate(spec(api_url="http://x", ref="main"))
    assert any("--api-url" in r for r in refusals)
    assert any("--ref" in r for r in refusals)


def test_build_refuses_what_validate_refuses():
    with pytest.raises(BackendError, match="must be <bucket>/<key>"):
        NATS_STORE.build(spec(key="db.json"))


def test_store_is_discovered_through_its_entry_point():
    assert discover().store("nats") is NATS_STORE
