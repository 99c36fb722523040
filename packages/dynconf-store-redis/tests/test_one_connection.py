"""A followed key holds one connection at the server: under RESP3 the subscription also reads.

Each test owns a private server, so ``CLIENT LIST`` counts only the source's connections and
the test's own admin client.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from dynconf.stores import Fetched

pytestmark = pytest.mark.redis


def admin_of(server: Any) -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=server.port)


def others(admin: Any) -> int:
    """Connections the server holds besides the admin client's own."""
    me = admin.client_id()
    return sum(1 for client in admin.client_list() if int(client["id"]) != me)


def protocols(admin: Any) -> set[int]:
    me = admin.client_id()
    return {int(c.get("resp", 2)) for c in admin.client_list() if int(c["id"]) != me}


def seeded(server: Any, kit: SimpleNamespace, text: str = '{"v": 0}') -> tuple[Any, str, Any]:
    """``(admin client, key, source)``: a fresh key on ``server`` holding ``text``."""
    admin, key = admin_of(server), f"cfg:{uuid.uuid4().hex}.json"
    admin.set(key, text)
    return admin, key, kit.build(server.url, key)


def text_of(answer: Any) -> str:
    assert isinstance(answer, Fetched), answer
    return answer.text


def test_a_followed_key_holds_one_connection_for_the_watch_and_every_read(
    private_redis: Callable[..., Any], kit: SimpleNamespace
) -> None:
    server = private_redis()
    admin, key, source = seeded(server, kit)
    assert text_of(source.fetch()) == '{"v": 0}'  # the first read, before any watch
    with kit.Watch(source) as watch:
        assert others(admin) == 1
        assert protocols(admin) == {3}
        admin.set(key, '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'
        assert text_of(source.fetch()) == '{"v": 1}'  # a resync, from another thread
        assert others(admin) == 1
    assert others(admin) == 0


def test_notifications_met_by_another_threads_read_are_not_lost(
    private_redis: Callable[..., Any], kit: SimpleNamespace
) -> None:
    server = private_redis()
    admin, key, source = seeded(server, kit, "0")
    done = threading.Event()

    def read_hard() -> None:
        while not done.is_set():
            source.fetch()

    with kit.Watch(source) as watch:
        reader = threading.Thread(target=read_hard, daemon=True)
        reader.start()
        try:
            for value in range(1, 31):
                admin.set(key, str(value))
                assert text_of(watch.next()) == str(value)
        finally:
            done.set()
            reader.join(5)
        assert others(admin) == 1


def test_a_server_that_refuses_hello_is_watched_on_the_classic_pair(
    private_redis: Callable[..., Any], kit: SimpleNamespace
) -> None:
    """A server before Redis 6 (or a proxy blocking HELLO): subscribe on RESP2, read beside it."""
    server = private_redis(extra=["--rename-command", "HELLO", ""])
    admin, key, source = seeded(server, kit)
    with kit.Watch(source) as watch:
        admin.set(key, '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'
        assert others(admin) == 2
        assert protocols(admin) == {2}
        assert text_of(source.fetch()) == '{"v": 1}'
    assert watch.failures == []


def test_the_watch_resubscribes_after_the_server_drops_its_connection(
    private_redis: Callable[..., Any], kit: SimpleNamespace
) -> None:
    server = private_redis()
    admin, key, source = seeded(server, kit)
    with kit.Watch(source) as watch:
        admin.client_kill_filter(_type="pubsub")
        watch.wait_watching()
        admin.set(key, '{"v": 1}')
        assert text_of(watch.next()) == '{"v": 1}'
        assert others(admin) == 1
    assert watch.failures, "the lost subscription was not reported"


def test_a_watch_on_a_descriptor_above_1024_is_served(
    private_redis: Callable[..., Any], kit: SimpleNamespace
) -> None:
    """A node agent holding a connection per document passes FD_SETSIZE; the wait uses poll."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    server = private_redis()
    admin, key, source = seeded(server, kit)
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with kit.Watch(source) as watch:
            admin.set(key, '{"v": 1}')
            assert text_of(watch.next()) == '{"v": 1}'
            assert watch.failures == []
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
