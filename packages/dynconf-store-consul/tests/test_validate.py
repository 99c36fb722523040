"""``validate``: every refusal for a wrong consul spec, each naming its fix (no server needed)."""

from __future__ import annotations

import pytest

from dynconf.errors import BackendError
from dynconf.plugins import discover
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_consul.plugin import CONSUL_STORE

pytestmark = pytest.mark.consul

GOOD = {"source": "consul", "endpoint": "http://consul.infra.svc:8500", "key": "myapp/config.json"}


def spec(**fields: object) -> StoreSpec:
    return StoreSpec.from_inputs(**{**GOOD, **fields})  # type: ignore[arg-type]


def refusals(**fields: object) -> list[str]:
    return CONSUL_STORE.validate(spec(**fields))


def test_discovery_finds_the_consul_store_without_importing_the_client():
    import subprocess
    import sys

    assert discover().store("consul") is CONSUL_STORE
    probe = (
        "import sys\n"
        "from dynconf.plugins import discover\n"
        "from dynconf.stores import StoreSpec\n"
        "store = discover().store('consul')\n"
        "store.validate(StoreSpec(source='consul', endpoint='http://c:8500', key='a.json'))\n"
        "print('consul' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"auth": "anonymous"},
        {"token": "t"},
        {"auth": "token", "token": "t"},
        {"auth": "kubernetes", "auth_mount": "k8s-pods"},
        {"auth": "kubernetes", "auth_mount": "k8s-pods", "auth_token_path": "/var/run/t"},
        {"auth": "jwt", "auth_mount": "oidc-ci", "token": "t"},
        {"key": "myapp/config", "extra": {"format": "json"}},
        {"extra": {"datacenter": "dc-2", "wait": "5m"}},
        {"endpoint": "https://consul:8501", "tls": TlsSettings(ca_file="/ca.pem")},
        {
            "endpoint": "https://consul:8501",
            "tls": TlsSettings(cert_file="/c.pem", key_file="/k.pem", server_name="consul"),
        },
    ],
)
def test_valid_specs_pass(fields):
    assert refusals(**fields) == []


@pytest.mark.parametrize(
    ("fields", "fix"),
    [
        ({"auth": "kubernetes"}, "needs --auth-mount"),
        ({"auth": "jwt", "token": "t"}, "needs --auth-mount"),
        ({"auth": "jwt", "auth_mount": "m"}, "needs a token"),
        ({"auth": "token"}, "needs a token"),
        ({"auth": "userpass"}, "use one of: anonymous, jwt, kubernetes, token"),
        ({"auth": "anonymous", "token": "t"}, "use --auth token"),
        ({"auth": "kubernetes", "auth_mount": "m", "token": "t"}, "use --auth jwt"),
        ({"auth_mount": "m"}, "add --auth kubernetes or --auth jwt"),
        ({"auth_token_path": "/t"}, "add --auth kubernetes"),
        ({"auth_role": "r"}, "binding rule"),
        ({"auth_username": "u"}, "remove it"),
        ({"key": "myapp/config"}, "format=json"),
        ({"key": "myapp/"}, "is a folder"),
        ({"key": ""}, "consul needs --key"),
        ({"key": "a/b", "extra": {"format": "xml"}}, "use one of: json"),
        ({"extra": {"colour": "blue"}}, "use one of: datacenter, format, wait"),
        ({"extra": {"datacenter": "dc 1"}}, "datacenter must be"),
        ({"extra": {"wait": "soon"}}, "at least 1 s"),
        ({"endpoint": ""}, "consul needs --endpoint"),
        ({"endpoint": "consul:8500"}, "http:// or https://"),
        ({"endpoint": "http://consul:8500/v1"}, "scheme://host:port"),
        ({"endpoint": "http://consul:port"}, "does not parse"),
        ({"tls": TlsSettings(ca_file="/ca.pem")}, "need an https:// consul endpoint"),
        (
            {"endpoint": "https://c:8501", "tls": TlsSettings(cert_file="/c.pem")},
            "--tls-cert needs --tls-key",
        ),
        (
            {"endpoint": "https://c:8501", "tls": TlsSettings(key_file="/k.pem")},
            "--tls-key needs --tls-cert",
        ),
        ({"namespace": "ns"}, "--namespace is vault's"),
        ({"ref": "main"}, "--ref is git's"),
        ({"timeout": 0.0}, "positive number"),
    ],
)
def test_wrong_specs_are_refused_naming_the_fix(fields, fix):
    found = refusals(**fields)
    assert any(fix in reason for reason in found), found


def test_every_refusal_is_returned_at_once():
    found = refusals(auth="jwt", key="x/", extra={"colour": "red"}, auth_role="r")
    assert len(found) >= 4


def test_credentials_in_the_endpoint_are_refused_and_redacted():
    found = refusals(endpoint="http://admin:hunter2@consul:8500")
    assert any("carries credentials" in reason for reason in found)
    assert not any("hunter2" in reason for reason in found)


def test_credentials_in_an_unparsable_endpoint_are_redacted_everywhere():
    bad = "http://admin:p@ss:w0rd@consul:port"
    found = refusals(endpoint=bad)
    assert found
    assert not any("w0rd" in reason for reason in found)
    assert "w0rd" not in CONSUL_STORE.describe(spec(endpoint=bad))


def test_describe_never_shows_the_token():
    described = CONSUL_STORE.describe(spec(auth="token", token="s3cr3t-token"))
    assert described == "consul http://consul.infra.svc:8500 kv/myapp/config.json"


def test_build_refuses_what_validate_refuses():
    with pytest.raises(BackendError, match="needs --auth-mount"):
        CONSUL_STORE.build(spec(auth="kubernetes"))
