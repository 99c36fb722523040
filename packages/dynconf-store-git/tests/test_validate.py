"""``validate``: every refusal for a wrong git spec, each naming its fix (no server needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dynconf.errors import BackendError
from dynconf.plugins import discover
from dynconf.stores import StoreSpec, TlsSettings
from dynconf_store_git.plugin import GIT_STORE

pytestmark = pytest.mark.git

GOOD = {
    "source": "git",
    "endpoint": "https://github.com/acme/config.git",
    "key": "billing/prod.yaml",
}
SSH = "git@github.com:acme/config.git"


def spec(**fields: object) -> StoreSpec:
    return StoreSpec.from_inputs(**{**GOOD, **fields})  # type: ignore[arg-type]


def refusals(**fields: object) -> list[str]:
    return GIT_STORE.validate(spec(**fields))


def test_discovery_finds_the_git_store_without_importing_gitpython():
    assert discover().store("git") is GIT_STORE
    probe = (
        "import sys\n"
        "from dynconf.plugins import discover\n"
        "from dynconf.stores import StoreSpec\n"
        "store = discover().store('git')\n"
        "store.validate(StoreSpec(source='git', endpoint='https://h/r.git', key='a.json'))\n"
        "store.build(StoreSpec(source='git', endpoint='https://h/r.git', key='a.json'))\n"
        "print('git' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"ref": "main"},
        {"ref": "branch:release/2024"},
        {"ref": "tag:v1.4"},
        {"ref": "commit:" + "8f3a" * 10},
        {"auth": "anonymous"},
        {"token": "t"},
        {"auth": "token", "token": "t", "auth_username": "deploy"},
        {"auth": "token", "auth_token_path": "/var/run/secrets/git/token"},
        {"endpoint": SSH, "ssh_key": "/etc/dynamic-config/ssh/ssh-privatekey"},
        {"endpoint": SSH, "auth": "ssh-key", "ssh_key": "/k", "extra": {"known_hosts": "/kh"}},
        {"endpoint": "ssh://git@host:2222/acme/config.git", "auth": "ssh"},
        {"endpoint": "git://127.0.0.1:9418/config.git"},
        {"endpoint": "/srv/git/config.git"},
        {"endpoint": "file:///srv/git/config.git"},
        {"endpoint": "http://127.0.0.1:8080/config.git", "auth": "token", "token": "t"},
        {"tls": TlsSettings(ca_file="/ca.pem", cert_file="/c.pem", key_file="/k.pem")},
        {"section": "db"},
        {"section": "db.primary", "ref": "tag:v1.4"},
        {"auth": "token", "token": "t", "extra": {"use_proxy": "true"}},
        {
            "key": "config",
            "extra": {
                "format": "toml",
                "cache_dir": "/var/cache/git",
                "max_bytes": "65536",
                "cache_max_bytes": "1048576",
            },
        },
    ],
)
def test_valid_specs_pass(fields):
    assert refusals(**fields) == []


@pytest.mark.parametrize(
    ("fields", "fix"),
    [
        ({"key": "/etc/passwd.yaml"}, "without the leading /"),
        ({"key": "../outside.yaml"}, "`..` part"),
        ({"key": "a/../../b.yaml"}, "`..` part"),
        ({"key": "a/./b.yaml"}, "`..` part"),
        ({"key": "billing/"}, "is a folder"),
        ({"key": ".git/config.json"}, "points into .git"),
        ({"key": ""}, "git needs --key"),
        ({"key": "billing/prod"}, "format=yaml"),
        ({"key": "a.yaml", "extra": {"format": "xml"}}, "use one of: json"),
        ({"ref": "commit:8f3a"}, "full commit id"),
        ({"ref": "tip:main"}, "unknown prefix"),
        ({"ref": "branch:bad..name"}, "not a valid branch name"),
        ({"ref": "refs/heads/main"}, "not a valid branch name"),
        ({"auth": "token"}, "needs a token"),
        ({"auth": "ssh-key", "endpoint": SSH}, "needs --ssh-key"),
        ({"auth": "ssh"}, "needs an ssh endpoint"),
        ({"ssh_key": "/k"}, "needs an ssh endpoint"),
        ({"endpoint": SSH, "token": "t"}, "needs an https:// endpoint"),
        ({"auth": "anonymous", "token": "t"}, "use --auth token"),
        ({"auth_username": "u"}, "add --auth token"),
        ({"endpoint": SSH, "auth": "ssh", "ssh_key": "/k"}, "--ssh-key is for --auth ssh-key"),
        ({"auth": "kubernetes"}, "use one of: anonymous, ssh, ssh-key, token"),
        ({"auth_role": "r"}, "no --auth-role"),
        ({"endpoint": "http://git.example.com/r.git", "token": "t"}, "clear text"),
        ({"endpoint": "http://git.example.com/r.git"}, "loopback hosts only"),
        ({"endpoint": "https://user:tok@github.com/acme/c.git"}, "carries credentials"),
        ({"endpoint": "ftp://h/r.git"}, "scheme ftp://"),
        ({"endpoint": "config.git"}, "relative path is refused"),
        ({"endpoint": "https://github.com"}, "names no repository path"),
        ({"endpoint": ""}, "git needs --endpoint"),
        ({"endpoint": SSH, "tls": TlsSettings(ca_file="/ca.pem")}, "https:// git endpoints only"),
        ({"tls": TlsSettings(server_name="git.internal")}, "--tls-server-name cannot be honoured"),
        ({"tls": TlsSettings(cert_file="/c.pem")}, "--tls-cert needs --tls-key"),
        ({"extra": {"known_hosts": "/kh"}}, "known_hosts is for ssh endpoints"),
        ({"extra": {"colour": "red"}}, "use one of: cache_dir"),
        ({"extra": {"max_bytes": "lots"}}, "whole number of bytes"),
        ({"extra": {"cache_dir": "relative"}}, "absolute path"),
        ({"namespace": "ns"}, "--namespace is vault's"),
        ({"extra": {"use_proxy": "maybe"}}, "use_proxy for git must be true or false"),
        ({"timeout": -1.0}, "positive number"),
    ],
)
def test_wrong_specs_are_refused_naming_the_fix(fields, fix):
    found = refusals(**fields)
    assert any(fix in reason for reason in found), found


def test_every_refusal_is_returned_at_once():
    found = refusals(key="/x", ref="tip:x", auth="ssh", extra={"colour": "red"})
    assert len(found) >= 4


def test_credentials_in_an_unparsable_endpoint_are_redacted_everywhere():
    bad = "https://admin:p@ss:w0rd@github.com:port/acme/c.git"
    found = refusals(endpoint=bad)
    assert found
    assert not any("w0rd" in reason for reason in found)
    assert "w0rd" not in GIT_STORE.describe(spec(endpoint=bad))


def test_lone_userinfo_is_treated_as_a_secret():
    described = GIT_STORE.describe(spec(endpoint="https://ghp_secret123@github.com/a/c.git"))
    assert "ghp_secret123" not in described


def test_describe_names_store_address_ref_and_key_never_the_token():
    described = GIT_STORE.describe(spec(ref="tag:v1.4", auth="token", token="s3cr3t"))
    assert described == "git https://github.com/acme/config.git tag v1.4:billing/prod.yaml"


def test_build_refuses_what_validate_refuses():
    with pytest.raises(BackendError, match="needs a token"):
        GIT_STORE.build(spec(auth="token"))
