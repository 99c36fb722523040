"""Auth against an ACL-enabled Consul: anonymous, ACL token, jwt login, one re-login on 403."""

from __future__ import annotations

import json
import logging
import time
import uuid

import pytest

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import Fetched

pytestmark = pytest.mark.consul

PREFIX = "authz/"


@pytest.fixture(scope="module")
def acl_setup(acl_consul, jwt_tools):
    """A reader policy+role on ``authz/``, a role with nothing, and a jwt auth method."""
    acl_consul.reader_policy("authz-reader", PREFIX)
    acl_consul.admin("PUT", "/v1/acl/role", {"Name": "authz-nothing", "Description": "no grants"})
    key, public_pem = jwt_tools.rsa_keypair()
    acl_consul.admin("PUT", "/v1/acl/auth-method", {
        "Name": "jwt-test", "Type": "jwt", "MaxTokenTTL": "10m",
        "Config": {"JWTValidationPubKeys": [public_pem], "BoundAudiences": ["consul"],
                   "ClaimMappings": {"app": "app"}},
    })  # fmt: skip
    acl_consul.admin("PUT", "/v1/acl/binding-rule", {
        "AuthMethod": "jwt-test", "BindType": "role", "BindName": "authz-reader",
        "Selector": "value.app==reader",
    })  # fmt: skip
    acl_consul.admin("PUT", "/v1/acl/binding-rule", {
        "AuthMethod": "jwt-test", "BindType": "role", "BindName": "authz-nothing",
        "Selector": "value.app==nothing",
    })  # fmt: skip
    doc_key = f"{PREFIX}app/config.json"
    acl_consul.put(doc_key, '{"greeting": "hello"}')
    return {
        "signing_key": key,
        "key": doc_key,
        "sign": jwt_tools.sign_jwt,
        "keypair": jwt_tools.rsa_keypair,
    }


def _jwt(setup, app: str = "reader", **claims: object) -> str:
    now = int(time.time())
    body: dict[str, object] = {"sub": "ci", "aud": "consul", "app": app, "iat": now, "nbf": now - 5,
                               "exp": now + 600, "jti": uuid.uuid4().hex}  # fmt: skip
    body.update(claims)
    return setup["sign"](setup["signing_key"], body)


def _count_calls(source):
    """Counts the requests a source sends (wraps its transport; the server stays real)."""
    calls: list[str] = []
    transport = source._transport
    original = transport.call

    def counted(method, path, **kwargs):
        calls.append(f"{method} {path}")
        return original(method, path, **kwargs)

    transport.call = counted
    return calls


def test_anonymous_read_is_refused_as_auth_naming_the_fix(acl_consul, acl_setup, make_source):
    with pytest.raises(AuthError, match="anonymous read") as caught:
        make_source(acl_consul.url, acl_setup["key"]).fetch()
    assert "--auth token" in str(caught.value)


def test_acl_token_reads_the_key(acl_consul, acl_setup, make_source):
    token = acl_consul.token_for("authz-reader")["SecretID"]
    answer = make_source(acl_consul.url, acl_setup["key"], auth="token", token=token).fetch()
    assert isinstance(answer, Fetched)
    assert json.loads(answer.text) == {"greeting": "hello"}


def test_token_without_auth_flag_is_sent_too(acl_consul, acl_setup, make_source):
    token = acl_consul.token_for("authz-reader")["SecretID"]
    assert isinstance(make_source(acl_consul.url, acl_setup["key"], token=token).fetch(), Fetched)


def test_refused_static_token_is_auth_and_never_retried(acl_consul, acl_setup, make_source):
    token = acl_consul.token_for("authz-reader")["SecretID"]
    source = make_source(acl_consul.url, f"elsewhere/{uuid.uuid4().hex}.json", auth="token",
                         token=token)  # fmt: skip
    calls = _count_calls(source)
    with pytest.raises(AuthError, match="not retried"):
        source.fetch()
    assert len(calls) == 1


def test_jwt_login_reads_and_holds_one_token(acl_consul, acl_setup, make_source):
    source = make_source(acl_consul.url, acl_setup["key"], auth="jwt", auth_mount="jwt-test",
                         token=_jwt(acl_setup))  # fmt: skip
    assert isinstance(source.fetch(), Fetched)
    assert isinstance(source.fetch(), Fetched)
    assert source.credential.logins == 1


def test_jwt_login_token_carries_the_ttl_consul_stated(acl_consul, acl_setup, make_source):
    source = make_source(acl_consul.url, acl_setup["key"], auth="jwt", auth_mount="jwt-test",
                         token=_jwt(acl_setup))  # fmt: skip
    source.fetch()
    left = source.credential._expires_at - time.monotonic()
    assert 500 < left <= 600


def test_close_logs_the_login_token_out(acl_consul, acl_setup, make_source):
    source = make_source(acl_consul.url, acl_setup["key"], auth="jwt", auth_mount="jwt-test",
                         token=_jwt(acl_setup))  # fmt: skip
    source.fetch()
    secret = source.credential._secret
    assert acl_consul.api("GET", "/v1/acl/token/self", token=secret)[0] == 200
    source.close()
    assert acl_consul.api("GET", "/v1/acl/token/self", token=secret)[0] == 403


def test_revoked_login_token_gets_exactly_one_fresh_login(acl_consul, acl_setup, make_source):
    source = make_source(acl_consul.url, acl_setup["key"], auth="jwt", auth_mount="jwt-test",
                         token=_jwt(acl_setup))  # fmt: skip
    source.fetch()
    _status, body = acl_consul.api("GET", "/v1/acl/token/self", token=source.credential._secret)
    accessor = json.loads(body)["AccessorID"]
    acl_consul.admin("DELETE", f"/v1/acl/token/{accessor}")
    calls = _count_calls(source)
    assert isinstance(source.fetch(), Fetched)
    assert source.credential.logins == 2
    assert calls == ["GET /v1/kv/authz/app/config.json", "POST /v1/acl/login",
                     "GET /v1/kv/authz/app/config.json"]  # fmt: skip


def test_second_refusal_after_relogin_is_auth(acl_consul, acl_setup, make_source):
    source = make_source(acl_consul.url, acl_setup["key"], auth="jwt", auth_mount="jwt-test",
                         token=_jwt(acl_setup, app="nothing"))  # fmt: skip
    calls = _count_calls(source)
    with pytest.raises(AuthError, match="twice"):
        source.fetch()
    assert source.credential.logins == 2
    assert calls.count("POST /v1/acl/login") == 2
    assert len([c for c in calls if c.startswith("GET")]) == 2


def test_jwt_signed_by_an_untrusted_key_is_remote_naming_the_bearer(acl_consul, acl_setup,
                                                                   make_source):  # fmt: skip
    # Consul 1.8 answers 500 (not 403) to a bearer the method cannot validate; the status
    # decides the kind, so this is remote, and the message points at the bearer.
    stranger, _ = acl_setup["keypair"]()
    bearer = acl_setup["sign"](
        stranger, {"aud": "consul", "app": "reader", "exp": int(time.time()) + 60}
    )
    source = make_source(acl_consul.url, acl_setup["key"], auth="jwt", auth_mount="jwt-test",
                         token=bearer)  # fmt: skip
    with pytest.raises(RemoteError, match="validate the bearer"):
        source.fetch()


def test_unknown_auth_method_is_refused_as_auth(acl_consul, acl_setup, make_source):
    source = make_source(acl_consul.url, acl_setup["key"], auth="jwt", auth_mount="no-such-method",
                         token=_jwt(acl_setup))  # fmt: skip
    with pytest.raises(AuthError, match="no-such-method"):
        source.fetch()


def test_watch_survives_a_revoked_login_token_silently(acl_consul, acl_setup, make_source,
                                                       watcher):  # fmt: skip
    key = f"{PREFIX}watch/{uuid.uuid4().hex}.json"
    acl_consul.put(key, '{"v": 1}')
    source = make_source(acl_consul.url, key, auth="jwt", auth_mount="jwt-test",
                         token=_jwt(acl_setup), extra={"wait": "2s"})  # fmt: skip
    watch = watcher(source)
    watch.wait_connected()
    _status, body = acl_consul.api("GET", "/v1/acl/token/self", token=source.credential._secret)
    acl_consul.admin("DELETE", f"/v1/acl/token/{json.loads(body)['AccessorID']}")
    acl_consul.put(key, '{"v": 2}')
    assert watch.next().text == '{"v": 2}'
    # the query in flight was admitted with the old token; the next one is refused
    acl_consul.put(key, '{"v": 3}')
    assert watch.next().text == '{"v": 3}'
    assert watch.failures == []
    assert source.credential.logins == 2


def test_no_credential_in_logs_or_errors(acl_consul, acl_setup, make_source, caplog):
    caplog.set_level(logging.DEBUG)
    static = acl_consul.token_for("authz-reader")["SecretID"]
    bearer = _jwt(acl_setup, app="nothing")
    texts: list[str] = []
    for fields in (
        {"auth": "token", "token": static},
        {"auth": "jwt", "auth_mount": "jwt-test", "token": bearer},
    ):
        source = make_source(acl_consul.url, f"elsewhere/{uuid.uuid4().hex}.json", **fields)
        with pytest.raises(AuthError) as caught:
            source.fetch()
        texts += [str(caught.value), repr(caught.value), source.describe(), repr(source),
                  repr(source.credential)]  # fmt: skip
        source.close()
    texts += [record.getMessage() + repr(record.__dict__) for record in caplog.records]
    blob = "\n".join(texts)
    for secret in (static, bearer, acl_consul.acl_token):
        assert secret not in blob
