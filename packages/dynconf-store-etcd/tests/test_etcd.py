"""The etcd source against a real etcd 3.5: read, watch, TLS, username/password, errors."""

from __future__ import annotations

import logging
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import ABSENT, Fetched

pytestmark = pytest.mark.etcd


def unique(ext: str = "json") -> str:
    return f"dynconf-test/{uuid.uuid4().hex}/config.{ext}"


def test_fetch_returns_text_format_and_mod_revision(etcd_server: Any, kit: SimpleNamespace) -> None:
    key = unique("toml")
    revision = kit.put(etcd_server.url, key, 'a = "b"\n')
    kit.put(etcd_server.url, unique(), "{}")  # a later, unrelated write moves the store only
    answer = kit.build(etcd_server.url, key).fetch()
    assert isinstance(answer, Fetched)
    assert (answer.text, answer.format, answer.revision) == ('a = "b"\n', "toml", str(revision))
    assert answer.numeric_revision == revision


def test_missing_key_is_absent(etcd_server: Any, kit: SimpleNamespace) -> None:
    assert kit.build(etcd_server.url, unique()).fetch() is ABSENT


def test_non_utf8_value_is_a_remote_error_without_the_value(
    etcd_server: Any, kit: SimpleNamespace
) -> None:
    key = unique()
    kit.put(etcd_server.url, key, b"\xff\xfeplanted")
    with pytest.raises(RemoteError, match="not UTF-8") as caught:
        kit.build(etcd_server.url, key).fetch()
    assert "planted" not in str(caught.value)


def test_unreachable_server_is_a_prompt_remote_error(kit: SimpleNamespace) -> None:
    started = time.monotonic()
    with pytest.raises(RemoteError, match="could not be reached"):
        kit.build(f"http://127.0.0.1:{kit.free_port()}", unique()).fetch()
    assert time.monotonic() - started < 5


def test_watch_primes_silently_then_yields_puts_and_delete(
    etcd_server: Any, kit: SimpleNamespace
) -> None:
    key = unique()
    kit.put(etcd_server.url, key, '{"v": 0}')
    with kit.Watch(kit.build(etcd_server.url, key)) as watch:
        assert watch.quiet(), "the starting value was announced"
        revision = kit.put(etcd_server.url, key, '{"v": 1}')
        answer = watch.next()
        assert isinstance(answer, Fetched)
        assert (answer.text, answer.revision) == ('{"v": 1}', str(revision))
        kit.put(etcd_server.url, unique(), "{}")  # another key: nothing for this watch
        assert watch.quiet()
        kit.delete(etcd_server.url, key)
        assert watch.next() is ABSENT
        kit.put(etcd_server.url, key, '{"v": 2}')
        answer = watch.next()
        assert isinstance(answer, Fetched) and answer.text == '{"v": 2}'


def test_watch_stops_within_half_a_second(etcd_server: Any, kit: SimpleNamespace) -> None:
    watch = kit.Watch(kit.build(etcd_server.url, unique()))
    watch.__enter__()
    started = time.monotonic()
    watch.stop.set()
    watch.thread.join(5)
    assert not watch.thread.is_alive()
    assert time.monotonic() - started < 0.6


# -- TLS ------------------------------------------------------------------------------


def tls(server: Any, kit: SimpleNamespace, **overrides: Any) -> Any:
    values = {"ca_file": str(server.ca_cert), "cert_file": str(server.client_cert),
              "key_file": str(server.client_key)}  # fmt: skip
    values.update(overrides)
    return kit.TlsSettings(**values)


def test_client_certificate_and_private_ca_read_and_watch(
    etcd_tls_server: Any, kit: SimpleNamespace
) -> None:
    key = unique()
    ctx = kit.tls_context(etcd_tls_server.ca_cert, etcd_tls_server.client_cert,
                          etcd_tls_server.client_key)  # fmt: skip
    kit.put(etcd_tls_server.url, key, '{"tls": true}', context=ctx)
    source = kit.build(etcd_tls_server.url, key, tls=tls(etcd_tls_server, kit))
    answer = source.fetch()
    assert isinstance(answer, Fetched) and answer.text == '{"tls": true}'
    with kit.Watch(source) as watch:
        kit.put(etcd_tls_server.url, key, '{"tls": 2}', context=ctx)
        answer = watch.next()
        assert isinstance(answer, Fetched) and answer.text == '{"tls": 2}'


def test_without_the_client_certificate_the_handshake_is_refused(
    etcd_tls_server: Any, kit: SimpleNamespace
) -> None:
    settings = kit.TlsSettings(ca_file=str(etcd_tls_server.ca_cert))
    with pytest.raises(RemoteError):
        kit.build(etcd_tls_server.url, unique(), tls=settings).fetch()


def test_without_the_private_ca_the_server_is_not_trusted(
    etcd_tls_server: Any, kit: SimpleNamespace
) -> None:
    settings = tls(etcd_tls_server, kit, ca_file=None)
    with pytest.raises(RemoteError, match="TLS handshake failed"):
        kit.build(etcd_tls_server.url, unique(), tls=settings).fetch()


def test_server_name_override_is_sent_and_verified(
    etcd_tls_server: Any, kit: SimpleNamespace
) -> None:
    key = unique()
    ctx = kit.tls_context(etcd_tls_server.ca_cert, etcd_tls_server.client_cert,
                          etcd_tls_server.client_key)  # fmt: skip
    kit.put(etcd_tls_server.url, key, "{}", context=ctx)
    good = tls(etcd_tls_server, kit, server_name="localhost")
    assert kit.build(etcd_tls_server.url, key, tls=good).fetch() != ABSENT
    wrong = tls(etcd_tls_server, kit, server_name="not-the-server.example")
    with pytest.raises(RemoteError, match="TLS handshake failed"):
        kit.build(etcd_tls_server.url, key, tls=wrong).fetch()


# -- username / password ----------------------------------------------------------------


def test_username_and_password_read_and_watch(etcd_auth_server: Any, kit: SimpleNamespace) -> None:
    key = unique()
    token = etcd_auth_server.authenticate()
    kit.put(etcd_auth_server.url, key, '{"user": 1}', token)
    source = kit.build(etcd_auth_server.url, key, auth_username=etcd_auth_server.user,
                       password=etcd_auth_server.password)  # fmt: skip
    answer = source.fetch()
    assert isinstance(answer, Fetched) and answer.text == '{"user": 1}'
    with kit.Watch(source) as watch:
        kit.put(etcd_auth_server.url, key, '{"user": 2}', etcd_auth_server.authenticate())
        answer = watch.next()
        assert isinstance(answer, Fetched) and answer.text == '{"user": 2}'


def test_wrong_password_is_auth_and_never_echoed(
    etcd_auth_server: Any, kit: SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    planted = "planted-" + uuid.uuid4().hex
    source = kit.build(etcd_auth_server.url, unique(), auth_username=etcd_auth_server.user,
                       password=planted)  # fmt: skip
    with pytest.raises(AuthError, match="refused the login") as caught:
        source.fetch()
    with pytest.raises(AuthError) as in_watch:
        next(iter(source.changes(1.0, lambda: False)))
    assert "store_watch_failed" in [r.getMessage() for r in caplog.records]
    texts = [
        str(in_watch.value),
        str(caught.value),
        repr(caught.value),
        caplog.text,
        source.describe(),
    ]
    assert all(planted not in text for text in texts)


def test_user_without_read_permission_is_auth(etcd_auth_server: Any, kit: SimpleNamespace) -> None:
    name, password = f"reader-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    kit.post(etcd_auth_server.url, "auth/user/add", {"name": name, "password": password},
             etcd_auth_server.authenticate())  # fmt: skip
    source = kit.build(etcd_auth_server.url, unique(), auth_username=name, password=password)
    with pytest.raises(AuthError, match="denied access"):
        source.fetch()
    with pytest.raises(AuthError):
        next(iter(source.changes(1.0, lambda: False)))
