"""redis faults on private servers: restart mid-watch, unreachable during a change,
notifications off, requirepass, client certificates required."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from dynconf.errors import AuthError, RemoteError
from dynconf.stores import Fetched
from dynconf_store_redis.source import NotificationsDisabledError

pytestmark = [pytest.mark.redis, pytest.mark.slow]

KEY = "app:config.json"


def text_of(answer: Any) -> str:
    assert isinstance(answer, Fetched), answer
    return answer.text


def test_server_killed_and_restarted_mid_watch_reports_and_delivers_next_change(
    private_redis: Callable[..., Any], kit: SimpleNamespace
) -> None:
    server = private_redis()
    redis.Redis(port=server.port).set(KEY, '{"v": 0}')
    with kit.Watch(kit.build(server.url, KEY)) as watch:
        server.kill()
        deadline = time.monotonic() + 10
        while not watch.failures and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watch.failures and isinstance(watch.failures[0], RemoteError)
        assert "subscription" in str(watch.failures[0])
        server.start()
        watch.wait_watching(timeout=30)
        redis.Redis(port=server.port).set(KEY, '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'


def test_change_made_while_unreachable_is_delivered_when_it_returns(
    private_redis: Callable[..., Any], proxy: Callable[[int], Any], kit: SimpleNamespace
) -> None:
    server = private_redis()
    path = proxy(server.port)
    direct = redis.Redis(port=server.port)
    direct.set(KEY, '{"v": 0}')
    with kit.Watch(kit.build(f"redis://127.0.0.1:{path.port}/0", KEY)) as watch:
        path.cut()
        direct.set(KEY, '{"v": "while away"}')
        time.sleep(1.0)
        assert watch.failures, "the dropped subscription was not reported"
        path.restore()
        assert text_of(watch.next(timeout=20)) == '{"v": "while away"}'
        direct.set(KEY, '{"v": 2}')
        assert text_of(watch.next()) == '{"v": 2}'


def test_notifications_off_is_a_clear_report_naming_the_fix(
    private_redis: Callable[..., Any], kit: SimpleNamespace
) -> None:
    server = private_redis(extra=["--notify-keyspace-events", ""])
    source = kit.build(server.url, KEY)
    failures: list[Exception] = []
    source.on_failure = failures.append
    with pytest.raises(NotificationsDisabledError, match="CONFIG SET notify-keyspace-events"):
        next(iter(source.changes(1.0, lambda: False)))
    assert failures, "the refusal was not reported"
    redis.Redis(port=server.port).config_set("notify-keyspace-events", "K$g")
    with kit.Watch(kit.build(server.url, KEY)) as watch:
        redis.Redis(port=server.port).set(KEY, "{}")
        assert text_of(watch.next()) == "{}"


def test_requirepass_in_the_url(
    private_redis: Callable[..., Any], kit: SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    password = uuid.uuid4().hex + "@#"
    server = private_redis(extra=["--requirepass", password])
    redis.Redis(port=server.port, password=password).set(KEY, '{"pw": 1}')
    encoded = password.replace("@", "%40").replace("#", "%23")
    source = kit.build(f"redis://:{encoded}@127.0.0.1:{server.port}/0", KEY)
    assert text_of(source.fetch()) == '{"pw": 1}'
    with kit.Watch(source) as watch:
        redis.Redis(port=server.port, password=password).set(KEY, '{"pw": 2}')
        assert text_of(watch.next()) == '{"pw": 2}'
    without = kit.build(f"redis://127.0.0.1:{server.port}/0", KEY)
    with pytest.raises(AuthError):
        without.fetch()
    assert password not in caplog.text and encoded not in source.describe()


def test_client_certificate_required_by_the_server(
    private_redis: Callable[..., Any], kit: SimpleNamespace, redis_server: Any
) -> None:
    certs = redis_server.ca_cert.parent
    port = kit.free_port()
    private_redis(extra=["--tls-port", str(port), "--tls-cert-file", str(certs / "server.crt"),
                         "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file",
                         str(certs / "ca.crt"), "--tls-auth-clients", "yes"])  # fmt: skip
    url = f"rediss://127.0.0.1:{port}/0"
    with_cert = kit.TlsSettings(ca_file=str(certs / "ca.crt"),
                                cert_file=str(redis_server.client_cert),
                                key_file=str(redis_server.client_key))  # fmt: skip
    assert kit.build(url, KEY, tls=with_cert).fetch() is not None
    only_ca = kit.TlsSettings(ca_file=str(certs / "ca.crt"))
    with pytest.raises(RemoteError):
        kit.build(url, KEY, tls=only_ca).fetch()
