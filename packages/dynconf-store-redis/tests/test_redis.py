"""The redis source against a real Redis 7: read, keyspace watch, ACL users, TLS, errors."""

from __future__ import annotations

import logging
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.errors import AuthError, InvalidError, RemoteError
from dynconf.stores import ABSENT, Fetched

pytestmark = pytest.mark.redis


def unique(ext: str = "json") -> str:
    return f"dynconf-test:{uuid.uuid4().hex}:config.{ext}"


def url_for(server: Any, db: int = 0, userinfo: str = "") -> str:
    return f"redis://{userinfo}{server.host}:{server.port}/{db}"


def text_of(answer: Any) -> str:
    assert isinstance(answer, Fetched), answer
    return answer.text


def test_fetch_returns_text_and_format_without_revision(
    redis_server: Any, kit: SimpleNamespace
) -> None:
    key = unique("yaml")
    redis_server.client.set(key, "a: 1\n")
    answer = kit.build(url_for(redis_server), key).fetch()
    assert isinstance(answer, Fetched)
    assert (answer.text, answer.format, answer.revision) == ("a: 1\n", "yaml", None)


def test_missing_key_is_absent(redis_server: Any, kit: SimpleNamespace) -> None:
    assert kit.build(url_for(redis_server), unique()).fetch() is ABSENT


def test_database_index_from_the_url(redis_server: Any, kit: SimpleNamespace) -> None:
    import redis

    key = unique()
    redis.Redis(host=redis_server.host, port=redis_server.port, db=3).set(key, '{"db": 3}')
    assert kit.build(url_for(redis_server, db=0), key).fetch() is ABSENT
    source = kit.build(url_for(redis_server, db=3), key)
    assert text_of(source.fetch()) == '{"db": 3}'
    assert source.channel == f"__keyspace@3__:{key}"
    with kit.Watch(source) as watch:
        redis.Redis(host=redis_server.host, port=redis_server.port, db=3).set(key, '{"db": 4}')
        assert text_of(watch.next()) == '{"db": 4}'


def test_unreachable_server_is_a_prompt_remote_error(kit: SimpleNamespace) -> None:
    started = time.monotonic()
    with pytest.raises(RemoteError, match="could not be reached"):
        kit.build(f"redis://127.0.0.1:{kit.free_port()}/0", unique()).fetch()
    assert time.monotonic() - started < 5


def test_watch_primes_silently_yields_writes_deletes_and_expiry(
    redis_server: Any, kit: SimpleNamespace
) -> None:
    key = unique()
    client = redis_server.client
    client.set(key, '{"v": 0}')
    with kit.Watch(kit.build(url_for(redis_server), key)) as watch:
        assert watch.quiet(), "the starting value was announced"
        client.set(key, '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'
        client.set(key, '{"v": 1}')  # same bytes: not a change
        client.set(unique(), "{}")  # another key
        assert watch.quiet()
        client.delete(key)
        assert watch.next() is ABSENT
        client.set(key, '{"v": 2}', px=300)
        assert text_of(watch.next()) == '{"v": 2}'
        assert watch.next(timeout=5) is ABSENT  # expired


def test_watch_stops_within_half_a_second(redis_server: Any, kit: SimpleNamespace) -> None:
    watch = kit.Watch(kit.build(url_for(redis_server), unique()))
    watch.__enter__()
    started = time.monotonic()
    watch.stop.set()
    watch.thread.join(5)
    assert not watch.thread.is_alive()
    assert time.monotonic() - started < 0.6


# -- ACL users -----------------------------------------------------------------------


@pytest.fixture
def acl_user(redis_server: Any) -> Any:
    """Makes ACL users on the session server and deletes them afterwards."""
    made: list[str] = []

    def make(*rules: str) -> tuple[str, str]:
        name, password = f"dynconf-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        redis_server.client.acl_setuser(name, enabled=True, passwords=[f"+{password}"])
        redis_server.client.execute_command("ACL", "SETUSER", name, *rules)
        made.append(name)
        return name, password

    yield make
    for name in made:
        redis_server.client.acl_deluser(name)


def test_acl_user_in_the_url_reads_and_watches(
    redis_server: Any, kit: SimpleNamespace, acl_user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    key = unique()
    name, password = acl_user("~dynconf-test:*", "+get", "+config|get", "+subscribe",
                              f"&__keyspace@0__:{key}")  # fmt: skip
    redis_server.client.set(key, '{"acl": 1}')
    source = kit.build(url_for(redis_server, userinfo=f"{name}:{password}@"), key)
    assert text_of(source.fetch()) == '{"acl": 1}'
    with kit.Watch(source) as watch:
        redis_server.client.set(key, '{"acl": 2}')
        assert text_of(watch.next()) == '{"acl": 2}'
    assert password not in source.describe() and name in source.describe()
    assert password not in caplog.text


def test_acl_user_without_config_permission_still_watches_with_a_warning(
    redis_server: Any, kit: SimpleNamespace, acl_user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    key = unique()
    name, password = acl_user("~dynconf-test:*", "+get", "+subscribe", f"&__keyspace@0__:{key}")
    source = kit.build(url_for(redis_server, userinfo=f"{name}:{password}@"), key)
    with kit.Watch(source) as watch:
        redis_server.client.set(key, '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'
    events = [record.getMessage() for record in caplog.records]
    assert "redis_notifications_unverified" in events


def test_acl_user_without_channel_permission_is_auth_naming_the_channel(
    redis_server: Any, kit: SimpleNamespace, acl_user: Any
) -> None:
    key = unique()
    name, password = acl_user(
        "~dynconf-test:*", "+get", "+config|get", "+subscribe", "resetchannels"
    )
    source = kit.build(url_for(redis_server, userinfo=f"{name}:{password}@"), key)
    with pytest.raises(AuthError, match=f"&__keyspace@0__:{key}"):
        next(iter(source.changes(1.0, lambda: False)))


def test_wrong_password_is_auth_and_never_echoed(
    redis_server: Any, kit: SimpleNamespace, acl_user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    name, _password = acl_user("~*", "+get")
    planted = "planted-" + uuid.uuid4().hex
    source = kit.build(url_for(redis_server, userinfo=f"{name}:{planted}@"), unique())
    with pytest.raises(AuthError, match="refused the URL's credentials") as caught:
        source.fetch()
    with pytest.raises(AuthError) as in_watch:
        next(iter(source.changes(1.0, lambda: False)))
    texts = [str(caught.value), repr(caught.value), str(in_watch.value), caplog.text,
             source.describe()]  # fmt: skip
    assert all(planted not in text for text in texts)


def test_user_without_read_permission_is_auth(
    redis_server: Any, kit: SimpleNamespace, acl_user: Any
) -> None:
    name, password = acl_user("~other:*", "+get")
    source = kit.build(url_for(redis_server, userinfo=f"{name}:{password}@"), unique())
    with pytest.raises(AuthError, match="may not read the key"):
        source.fetch()


# -- TLS -------------------------------------------------------------------------------


def test_rediss_with_private_ca_and_client_certificate(
    redis_server: Any, kit: SimpleNamespace
) -> None:
    key = unique()
    redis_server.client.set(key, '{"tls": 1}')
    tls = kit.TlsSettings(ca_file=str(redis_server.ca_cert),
                          cert_file=str(redis_server.client_cert),
                          key_file=str(redis_server.client_key))  # fmt: skip
    source = kit.build(redis_server.tls_url, key, tls=tls)
    assert text_of(source.fetch()) == '{"tls": 1}'
    with kit.Watch(source) as watch:
        redis_server.client.set(key, '{"tls": 2}')
        assert text_of(watch.next()) == '{"tls": 2}'
    only_ca = kit.build(redis_server.tls_url, key, tls=kit.TlsSettings(
        ca_file=str(redis_server.ca_cert)))  # fmt: skip
    assert text_of(only_ca.fetch()) == '{"tls": 2}'


def test_rediss_without_the_private_ca_is_not_trusted(
    redis_server: Any, kit: SimpleNamespace
) -> None:
    with pytest.raises(RemoteError, match="could not be reached"):
        kit.build(redis_server.tls_url, unique()).fetch()


def _gets(redis_server: Any) -> int:
    stats = redis_server.client.info("commandstats").get("cmdstat_get", {})
    return int(stats.get("calls", 0))


def test_a_value_past_the_ceiling_is_refused_by_its_length_without_a_get(
    redis_server: Any, kit: SimpleNamespace
) -> None:
    """``StoreSpec.max_bytes`` (the agent's ``--max-document-bytes``): ``STRLEN`` first, so
    a value past it is never read whole (redis-py holds a read value about three times)."""
    key = unique()
    redis_server.client.set(key, '{"v": "planted-value"}' + " " * 2000)
    source = kit.build(url_for(redis_server), key, max_bytes=1000)
    gets = _gets(redis_server)
    with pytest.raises(InvalidError, match="2022 bytes, past the 1000-byte ceiling") as caught:
        source.fetch()
    assert _gets(redis_server) == gets, "the value past the ceiling was read with GET"
    assert "planted-value" not in str(caught.value)
    redis_server.client.set(key, '{"v": 0}')
    with kit.Watch(source) as watch:  # and on the watch's own connection (RESP3)
        redis_server.client.set(key, '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'
        gets = _gets(redis_server)
        redis_server.client.set(key, "x" * 1001)
        with pytest.raises(InvalidError, match="1001 bytes, past the 1000-byte ceiling"):
            source.fetch()
        assert _gets(redis_server) == gets
        # the watch met the refusal too and stays up: nothing handed on, no failure, and the
        # next write within the ceiling arrives through the same subscription
        assert watch.quiet(1.0)
        assert watch.failures == []
        redis_server.client.set(key, '{"v": 2}')
        assert text_of(watch.next()) == '{"v": 2}'
        assert watch.failures == []


def test_an_acl_user_refused_strlen_is_read_as_before_and_told_once(
    redis_server: Any, kit: SimpleNamespace, acl_user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    key = unique()
    name, password = acl_user("~dynconf-test:*", "+get")
    redis_server.client.set(key, '{"v": 1}')
    source = kit.build(url_for(redis_server, userinfo=f"{name}:{password}@"), key, max_bytes=5)
    for _ in range(2):
        assert text_of(source.fetch()) == '{"v": 1}'  # the engine's check refuses it later
    warned = [r for r in caplog.records if r.getMessage() == "store_size_unchecked"]
    assert len(warned) == 1 and "+strlen" in warned[0].__dict__["detail"]
    assert password not in caplog.text
