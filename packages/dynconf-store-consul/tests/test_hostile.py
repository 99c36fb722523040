"""A store answer or a pod's environment must not send the ACL token anywhere but the agent.

Loopback fakes stand in for what a real agent will not do on demand: answer 307 to another
host, or answer a blocking query at once with an index that did not move.
"""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from dynconf.errors import RemoteError
from dynconf.stores import WATCH_FLOOR, Fetched
from tests.fixtures.hostile import Listener, redirecting

pytestmark = pytest.mark.consul

KEY = "hostile/app/config.json"
TOKEN = "planted-consul-token-4f1c9e"


def test_token_is_not_sent_to_a_redirect_target(make_source):
    with redirecting() as (agent, elsewhere):
        source = make_source(agent.url, KEY, auth="token", token=TOKEN)
        with pytest.raises(RemoteError) as refused:
            source.fetch()
    assert agent.saw(TOKEN)  # the agent the spec names gets it, and only that one
    assert elsewhere.seen == []
    assert "307 redirecting to http://127.0.0.2:" in refused.value.message
    assert "follow_redirects" in refused.value.message
    assert TOKEN not in refused.value.message


def test_same_origin_redirect_is_followed_only_when_opted_in(make_source):
    with redirecting(same_origin=True) as (agent, moved):
        source = make_source(agent.url, KEY, auth="token", token=TOKEN)
        with pytest.raises(RemoteError, match="follow_redirects=true"):
            source.fetch()
        assert moved.seen == []
        opted = make_source(
            agent.url, KEY, auth="token", token=TOKEN, extra={"follow_redirects": "true"}
        )
        with pytest.raises(RemoteError):
            opted.fetch()  # followed; the moved path answers 502
    assert len(moved.seen) == 1


def test_opted_in_redirect_to_another_host_is_still_refused(make_source):
    with redirecting() as (agent, elsewhere):
        source = make_source(
            agent.url, KEY, auth="token", token=TOKEN, extra={"follow_redirects": "true"}
        )
        with pytest.raises(RemoteError, match="another origin"):
            source.fetch()
    assert elsewhere.seen == []


def test_environment_proxy_is_not_used(plain_consul, env_proxy, make_source):
    plain_consul.put(KEY, '{"v": 1}')
    env_proxy.engage()
    source = make_source(plain_consul.url, KEY, auth="token", token=TOKEN)
    assert source.fetch().text == '{"v": 1}'
    assert env_proxy.seen == []


def test_environment_proxy_is_used_when_opted_in(plain_consul, env_proxy, make_source):
    env_proxy.engage()
    source = make_source(
        plain_consul.url, KEY, auth="token", token=TOKEN, extra={"use_proxy": "true"}
    )
    with pytest.raises(RemoteError):
        source.fetch()  # the recording env_proxy answers 502
    assert len(env_proxy.seen) == 1


def test_unmoved_index_answered_at_once_keeps_queries_a_floor_apart(make_source):
    value = base64.b64encode(b'{"v": 1}').decode()
    body = json.dumps([{"Key": KEY, "Value": value, "ModifyIndex": 7}]).encode()
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Consul-Index: 7\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    agent = Listener("127.0.0.1", lambda _request: reply)
    source = make_source(agent.url, KEY, extra={"wait": "60s"})
    stop = threading.Event()
    delivered: list[Fetched] = []
    watch = threading.Thread(
        target=lambda: delivered.extend(source.changes(1.0, stop.is_set)), daemon=True
    )
    try:
        watch.start()
        time.sleep(3.0)
    finally:
        stop.set()
        watch.join(5)
        agent.close()
    assert delivered == []
    assert 2 <= len(agent.seen) <= 3.0 / WATCH_FLOOR + 1


def _kv_reply(index: int, text: str) -> bytes:
    value = base64.b64encode(text.encode()).decode()
    body = json.dumps([{"Key": KEY, "Value": value, "ModifyIndex": index}]).encode()
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"X-Consul-Index: {index}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def _watch_for(source: object, seconds: float) -> list[tuple[float, Fetched]]:
    """What the watch delivers in ``seconds``, each with when (monotonic)."""
    stop = threading.Event()
    delivered: list[tuple[float, Fetched]] = []

    def run() -> None:
        for answer in source.changes(1.0, stop.is_set):  # type: ignore[attr-defined]
            delivered.append((time.monotonic(), answer))

    watch = threading.Thread(target=run, daemon=True)
    try:
        watch.start()
        time.sleep(seconds)
    finally:
        stop.set()
        watch.join(5)
    return delivered


@pytest.mark.parametrize(
    "indexes",
    [range(10, 10_000), range(10_000, 0, -1)],
    ids=["forward-without-news", "backwards"],
)
def test_an_index_that_brings_nothing_new_answered_at_once_keeps_queries_a_floor_apart(
    make_source, indexes
):
    """A store (or a busy datacenter's other keys) moving the index forward on every answer
    without changing the document, or moving it backwards, must not turn the watch into a
    request storm."""
    count = iter(indexes)
    agent = Listener("127.0.0.1", lambda _request: _kv_reply(next(count), '{"v": 1}'))
    try:
        delivered = _watch_for(make_source(agent.url, KEY, extra={"wait": "60s"}), 3.0)
    finally:
        agent.close()
    assert delivered == []
    assert 2 <= len(agent.seen) <= 3.0 / WATCH_FLOOR + 2


def test_changes_brought_by_a_new_index_are_delivered_without_waiting_on_the_floor(make_source):
    """Consul's rule: back off on an index that did not move; act on one that did. Three
    changes answered back to back arrive back to back, not a floor apart each."""
    script = [_kv_reply(7, '{"v": 1}'), _kv_reply(8, '{"v": 2}'), _kv_reply(9, '{"v": 3}'),
              _kv_reply(10, '{"v": 4}')]  # fmt: skip
    agent = Listener("127.0.0.1", lambda _request: script.pop(0) if len(script) > 1 else script[0])
    try:
        delivered = _watch_for(make_source(agent.url, KEY, extra={"wait": "60s"}), 2.0)
    finally:
        agent.close()
    assert [answer.text for _, answer in delivered] == ['{"v": 2}', '{"v": 3}', '{"v": 4}']
    first, last = delivered[0][0], delivered[-1][0]
    assert last - first < WATCH_FLOOR  # the old floor held each one half a second
