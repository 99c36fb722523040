"""``validate``: every refusal for a wrong firestore spec, each naming its fix (no server)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dynconf.errors import BackendError
from dynconf.plugins import discover
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_firestore.plugin import FIRESTORE_STORE

pytestmark = pytest.mark.firestore

GOOD = {"source": "firestore", "endpoint": "acme-prod", "key": "config/billing"}


def spec(**fields: object) -> StoreSpec:
    return StoreSpec.from_inputs(**{**GOOD, **fields})  # type: ignore[arg-type]


def refusals(**fields: object) -> list[str]:
    return FIRESTORE_STORE.validate(spec(**fields))


def test_discovery_finds_the_store_without_importing_the_client():
    assert discover().store("firestore") is FIRESTORE_STORE
    probe = (
        "import sys\n"
        "from dynconf.plugins import discover\n"
        "from dynconf.stores import StoreSpec\n"
        "store = discover().store('firestore')\n"
        "store.validate(StoreSpec(source='firestore', endpoint='p-1', key='a/b'))\n"
        "print('google.cloud.firestore' in sys.modules, 'grpc' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == "False False"


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"auth": "metadata-server"},
        {"endpoint": "acme-prod/eu-config"},
        {"key": "environments/prod/config/db"},
        {"key": "/config/billing/"},
        {"auth": "access-token", "token": "ya29.x"},
        {"auth": "emulator", "api_url": "127.0.0.1:8080"},
        {"auth": "emulator", "api_url": "http://firestore-emulator.test.svc:8080"},
        {"api_url": "https://eu-firestore.googleapis.com"},
        {"timeout": 5.0},
    ],
)
def test_valid_specs_pass(fields):
    assert refusals(**fields) == []


@pytest.mark.parametrize(
    ("fields", "fix"),
    [
        ({"endpoint": ""}, "firestore needs --endpoint"),
        ({"endpoint": "https://firestore.googleapis.com"}, "goes in --api-url"),
        ({"endpoint": "Acme Prod"}, "is not <project> or <project>/<database>"),
        ({"endpoint": "acme/db/extra"}, "is not <project> or <project>/<database>"),
        ({"key": ""}, "firestore needs --key"),
        ({"key": "config"}, "names a collection"),
        ({"key": "a/b/c"}, "names a collection"),
        ({"key": "a//b"}, "empty"),
        ({"key": "a/__b__"}, "reserved"),
        ({"auth": "access-token"}, "needs a token"),
        ({"auth": "emulator"}, "needs --api-url"),
        ({"auth": "emulator", "api_url": "http://emu"}, "host:port"),
        ({"api_url": "http://plain:8080"}, "https://host[:port]"),
        ({"auth": "userpass"}, "use one of: access-token, emulator, metadata-server"),
        ({"token": "ya29.x"}, "use --auth access-token"),
        ({"auth": "emulator", "api_url": "e:1", "token": "t"}, "use --auth access-token"),
        ({"auth_mount": "m"}, "takes no --auth-mount"),
        ({"auth_role": "r"}, "takes no --auth-role"),
        ({"auth_token_path": "/t"}, "takes no --auth-token-path"),
        ({"tls": TlsSettings(ca_file="/ca.pem")}, "cannot honour --ca"),
        ({"tls": TlsSettings(skip_verify=True)}, "--tls-skip-verify"),
        ({"extra": {"colour": "red"}}, "is not a setting firestore reads"),
        ({"namespace": "ns"}, "--namespace is vault's"),
        ({"timeout": 0.0}, "positive number"),
    ],
)
def test_wrong_specs_are_refused_naming_the_fix(fields, fix):
    found = refusals(**fields)
    assert any(fix in reason for reason in found), found


def test_every_refusal_is_returned_at_once():
    assert len(refusals(key="x", auth="access-token", auth_role="r")) >= 3


def test_describe_names_the_document_and_never_the_token():
    described = FIRESTORE_STORE.describe(spec(auth="access-token", token="ya29.s3cr3t"))
    assert described == "firestore projects/acme-prod/databases/(default)/documents/config/billing"
    named = FIRESTORE_STORE.describe(spec(endpoint="acme-prod/eu-config", api_url="e:1"))
    assert (
        named == "firestore projects/acme-prod/databases/eu-config/documents/config/billing at e:1"
    )


def test_token_is_not_in_the_source_repr():
    source = FIRESTORE_STORE.build(spec(auth="access-token", token="ya29.s3cr3t"))
    assert "s3cr3t" not in repr(source)
    assert "s3cr3t" not in repr(source._connection)


def test_build_refuses_what_validate_refuses():
    with pytest.raises(BackendError, match="needs a token"):
        FIRESTORE_STORE.build(spec(auth="access-token"))


def test_emulator_variable_does_not_redirect_a_production_client(monkeypatch):
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
    source = FIRESTORE_STORE.build(spec(auth="access-token", token="ya29.x"))
    document = source._document()
    assert document._client._emulator_host is None
    source.close()
